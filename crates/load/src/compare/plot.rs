//! `aesload compare --plot`: the runs side by side in SVG. Four panels
//! (throughput, test duration, average queue time, total processing
//! time); in each, one group of bars per suite and one bar per run, in the
//! run's colour, its value written above it (a bar too small to see still
//! has its number).

use std::fmt::Write as _;

use super::{Figures, Run, suite_names};
use crate::plot::{document, escape, grid, nice_ticks, rect, text};

/// Two panels side by side with the gap between them and a right margin
/// as wide as the gap: the right column stays inside the frame.
const WIDTH: f64 = LEFT + 2.0 * PANEL_WIDTH + 2.0 * PANEL_GAP_X;
const HEADER: f64 = 70.0;
const PANEL_WIDTH: f64 = 560.0;
const PANEL_HEIGHT: f64 = 240.0;
const PANEL_GAP_X: f64 = 40.0;
const PANEL_ROW: f64 = 320.0;
const LEFT: f64 = 70.0;

/// Colour-blind-safe colours (Okabe–Ito), one per run, repeating.
const PALETTE: [&str; 7] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
];

/// A panel: title, unit and the value drawn.
type Panel = (&'static str, &'static str, fn(&Figures) -> f64);

const PANELS: [Panel; 4] = [
    ("Avg Bytes per Second", "MB/s", |f| {
        f.throughput_bytes_per_sec / 1e6
    }),
    ("Test Duration", "s", |f| f.duration_s),
    ("Avg Queue Time", "s", |f| f.avg_queue_s),
    ("Total Processing Time", "s", |f| f.total_processing_s),
];

/// The SVG for `runs` (prepared with [`super::prepare`]).
pub fn render(runs: &[Run]) -> String {
    let rows = PANELS.len().div_ceil(2);
    let height = HEADER + PANEL_ROW * rows as f64;
    let mut svg = document(WIDTH, height, "aesload compare");
    let mut x = 20.0;
    for (index, run) in runs.iter().enumerate() {
        let step = 40.0 + run.label.chars().count() as f64 * 7.0;
        if x + step > WIDTH - 20.0 {
            // The legend stays inside the frame: what does not fit is in
            // each bar's tooltip.
            text(&mut svg, x, 52.5, 12, "start", "normal", "…");
            break;
        }
        rect(&mut svg, x, 42.0, 12.0, 12.0, color(index), 1.0);
        text(&mut svg, x + 17.0, 52.5, 12, "start", "normal", &run.label);
        x += step;
    }
    let suites = suite_names(runs);
    for (index, (title, unit, value)) in PANELS.iter().enumerate() {
        let left = LEFT + (index % 2) as f64 * (PANEL_WIDTH + PANEL_GAP_X);
        let top = HEADER + 30.0 + (index / 2) as f64 * PANEL_ROW;
        panel(&mut svg, runs, &suites, (left, top), (title, unit), *value);
    }
    svg.push_str("</svg>\n");
    svg
}

fn color(run: usize) -> &'static str {
    PALETTE[run % PALETTE.len()]
}

fn panel(
    svg: &mut String,
    runs: &[Run],
    suites: &[String],
    (left, top): (f64, f64),
    (title, unit): (&str, &str),
    value: fn(&Figures) -> f64,
) {
    text(
        svg,
        left,
        top - 10.0,
        14,
        "start",
        "bold",
        &format!("{title} ({unit})"),
    );
    let largest = runs
        .iter()
        .flat_map(|run| run.suites.iter().map(|(_, figures)| value(figures)))
        .filter(|value| value.is_finite())
        .fold(0.0, f64::max);
    let (ticks, y_max) = nice_ticks(largest);
    grid(svg, (left, top), (PANEL_WIDTH, PANEL_HEIGHT), &ticks, y_max);
    let group = PANEL_WIDTH / suites.len().max(1) as f64;
    let bar = (group * 0.8 / runs.len().max(1) as f64).min(60.0);
    for (slot, suite) in suites.iter().enumerate() {
        let center = left + group * (slot as f64 + 0.5);
        text(
            svg,
            center,
            top + PANEL_HEIGHT + 16.0,
            12,
            "middle",
            "normal",
            suite,
        );
        let start = center - bar * runs.len() as f64 / 2.0;
        for (index, run) in runs.iter().enumerate() {
            let Some((_, figures)) = run.suites.iter().find(|(name, _)| name == suite) else {
                continue;
            };
            let shown = value(figures);
            if !shown.is_finite() {
                continue;
            }
            let height = shown / y_max * PANEL_HEIGHT;
            let x = start + bar * index as f64;
            let _ = writeln!(
                svg,
                r#"<rect x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{height:.2}" fill="{fill}"><title>{title}</title></rect>"#,
                y = top + PANEL_HEIGHT - height,
                w = bar * 0.92,
                fill = color(index),
                title = escape(&format!("{}, {suite}: {shown:.3} {unit}", run.label)),
            );
            text(
                svg,
                x + bar * 0.46,
                top + PANEL_HEIGHT - height - 3.0,
                9,
                "middle",
                "normal",
                &short(shown),
            );
        }
    }
}

/// A value in at most about four significant figures.
fn short(value: f64) -> String {
    match value.abs() {
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 10.0 => format!("{value:.1}"),
        v if v >= 0.01 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::run;

    #[test]
    fn one_bar_per_run_per_suite_per_panel() {
        let runs = vec![
            run("study", &[("basic2", 400_000.0), ("large", 400_000.0)]),
            run("aesd", &[("basic2", 90e6)]),
        ];
        let svg = render(&runs);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        let bars = |fill: &str| svg.matches(&format!(r#"fill="{fill}"><title>"#)).count();
        assert_eq!(bars(PALETTE[0]), 2 * PANELS.len(), "study: two suites");
        assert_eq!(bars(PALETTE[1]), PANELS.len(), "aesd: one suite");
        assert!(svg.contains("study, large: 0.400 MB/s"), "{svg}");
        assert!(svg.contains(">90.0<"), "value labels: {svg}");
    }

    /// Every x coordinate (rectangles with their width, lines' ends,
    /// text anchors) lies inside the document's width.
    #[test]
    fn everything_stays_inside_the_frame() {
        let runs: Vec<Run> = (0..12)
            .map(|index| {
                run(
                    &format!("a-long-run-label-{index}"),
                    &[("basic2", 1e6), ("large", 2e6)],
                )
            })
            .collect();
        let svg = render(&runs);
        let number_after = |text: &str, key: &str| -> Vec<f64> {
            text.match_indices(key)
                .filter_map(|(at, _)| {
                    let rest = &text[at + key.len()..];
                    rest[..rest.find('"')?].parse().ok()
                })
                .collect()
        };
        let width = number_after(&svg, r#" width=""#)[0];
        assert_eq!(width, WIDTH);
        for element in svg.lines().filter(|line| !line.starts_with("<svg")) {
            let xs = number_after(element, r#" x=""#);
            let widths = number_after(element, r#" width=""#);
            let right = xs.first().copied().unwrap_or(0.0) + widths.first().copied().unwrap_or(0.0);
            assert!(
                right <= WIDTH,
                "past the frame ({right} > {WIDTH}): {element}"
            );
            for end in number_after(element, r#" x2=""#) {
                assert!(end <= WIDTH, "past the frame: {element}");
            }
        }
    }

    #[test]
    fn short_keeps_small_values_readable() {
        assert_eq!(short(406.06), "406");
        assert_eq!(short(12.34), "12.3");
        assert_eq!(short(0.22174), "0.22");
        assert_eq!(short(0.004), "0.004");
    }
}
