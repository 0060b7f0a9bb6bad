//! The `--plot` picture: an SVG with one row per suite, so a run can be
//! read at a glance. Left: one stacked bar per transfer, in start order
//! (queue, network and processing time; failed transfers in red).
//! Right: throughput over time, with the suite's average (the study's
//! headline figure) as a dashed line.
//!
//! Hand-written SVG: a few rectangles, lines and labels need no plotting
//! library, and nothing here depends on system fonts or libraries.

use std::fmt::Write as _;
use std::time::Duration;

use crate::durations::Warmup;
use crate::record::{SuiteRun, Transfer};
use crate::report::Summary;
use crate::server_metrics::ServerSample;

const WIDTH: f64 = 1200.0;
const HEADER: f64 = 64.0;
const ROW: f64 = 330.0;
const PLOT_TOP: f64 = 44.0;
const PLOT_HEIGHT: f64 = 220.0;
const BARS_LEFT: f64 = 80.0;
const BARS_WIDTH: f64 = 500.0;
const RATE_LEFT: f64 = 680.0;
const RATE_WIDTH: f64 = 490.0;

const QUEUE: &str = "#e69f00";
const NETWORK: &str = "#56b4e9";
const PROCESSING: &str = "#0072b2";
const FAILED: &str = "#d55e00";
const RATE: &str = "#009e73";
pub(crate) const AXIS: &str = "#444";
pub(crate) const GRID: &str = "#e4e4e4";

/// The SVG for `runs` (warm-up transfers drawn faded).
/// An `interrupted` run's suites that ran fewer transfers than planned
/// say so in their titles.
pub fn render(
    runs: &[SuiteRun],
    warmup: Warmup,
    server: &[ServerSample],
    interrupted: bool,
) -> String {
    let server_rows = usize::from(!server.is_empty());
    let height = HEADER + ROW * (runs.len().max(1) + server_rows) as f64;
    let mut svg = document(WIDTH, height, "aesload results");
    let mut x = 20.0;
    for (color, label) in [
        (QUEUE, "queue (server)"),
        (NETWORK, "network (the rest)"),
        (PROCESSING, "processing (server)"),
        (FAILED, "failed"),
        (RATE, "throughput"),
    ] {
        rect(&mut svg, x, 40.0, 12.0, 12.0, color, 1.0);
        text(&mut svg, x + 17.0, 50.5, 12, "start", "normal", label);
        x += 30.0 + label.len() as f64 * 7.0;
    }
    if warmup != Warmup::None {
        text(
            &mut svg,
            x,
            50.5,
            12,
            "start",
            "normal",
            &format!("faded: warm-up ({warmup})"),
        );
    }
    for (index, suite) in runs.iter().enumerate() {
        let top = HEADER + ROW * index as f64;
        suite_row(&mut svg, suite, warmup, top, interrupted);
    }
    if !server.is_empty() {
        server_row(&mut svg, server, HEADER + ROW * runs.len() as f64);
    }
    svg.push_str("</svg>\n");
    svg
}

fn suite_row(svg: &mut String, suite: &SuiteRun, warmup: Warmup, top: f64, interrupted: bool) {
    let mut summary = Summary::of(&suite.run, warmup);
    if interrupted {
        summary = summary.with_planned(suite.plan.own_clients().count());
    }
    let title = suite_title(&suite.name, &summary);
    let _ = writeln!(
        svg,
        r##"<line x1="20" y1="{y}" x2="{x2}" y2="{y}" stroke="#bbb"/>"##,
        y = top + 8.0,
        x2 = WIDTH - 20.0
    );
    text(svg, 20.0, top + 28.0, 15, "start", "bold", &title);
    stacked_bars(svg, &suite.run.transfers, warmup, top + PLOT_TOP);
    throughput(svg, suite, &summary, top + PLOT_TOP);
}

/// A suite's title: what verified, the throughput, and the total time's
/// percentiles ("n/a" with no verified transfer, as in the table); an
/// interrupted run says so first.
fn suite_title(name: &str, summary: &Summary) -> String {
    let time = |duration: Duration| match summary.verified {
        0 => crate::report::NOT_MEASURED.to_owned(),
        _ => format!("{:.3} s", duration.as_secs_f64()),
    };
    let interrupted = match summary.interrupted_of() {
        Some(planned) => format!(
            "INTERRUPTED after {} of {planned} planned transfers; ",
            summary.transfers + summary.warmup_excluded
        ),
        None => String::new(),
    };
    format!(
        "{name}: {interrupted}{} of {} verified, {:.2} MB in {:.2} s = {:.2} MB/s; total time p50 {}, p99 {}",
        summary.verified,
        summary.transfers,
        summary.bytes_processed as f64 / 1e6,
        summary.duration.as_secs_f64(),
        summary.throughput_bytes_per_sec / 1e6,
        time(summary.total_time.p50),
        time(summary.total_time.p99),
    )
}

/// One bar per transfer: queue at the bottom, then network, then
/// processing; a failed transfer is one red bar of its total time.
fn stacked_bars(svg: &mut String, transfers: &[Transfer], warmup: Warmup, top: f64) {
    let longest = transfers
        .iter()
        .map(Transfer::total)
        .max()
        .unwrap_or(Duration::ZERO)
        .as_secs_f64();
    let (ticks, y_max) = nice_ticks(longest);
    let y_of = |secs: f64| top + PLOT_HEIGHT - secs / y_max * PLOT_HEIGHT;
    axes(svg, BARS_LEFT, BARS_WIDTH, top, &ticks, y_max, "seconds");
    let count = transfers.len().max(1) as f64;
    let slot = BARS_WIDTH / count;
    let width = if slot >= 3.0 { slot * 0.8 } else { slot };
    // Faint lines between batches (closed loop), when they are few
    // enough to tell apart.
    let batches = transfers.last().and_then(|last| last.batch).unwrap_or(0) + 1;
    if (2..=100).contains(&batches) {
        for (index, pair) in transfers.windows(2).enumerate() {
            if pair[0].batch != pair[1].batch {
                let x = BARS_LEFT + slot * (index + 1) as f64;
                let _ = writeln!(
                    svg,
                    r#"<line x1="{x:.2}" y1="{top}" x2="{x:.2}" y2="{bottom}" stroke="{AXIS}" stroke-opacity="0.35" stroke-dasharray="3 3"/>"#,
                    bottom = top + PLOT_HEIGHT
                );
            }
        }
    }
    for (index, transfer) in transfers.iter().enumerate() {
        let x = BARS_LEFT + slot * index as f64 + (slot - width) / 2.0;
        let opacity = if warmup.excludes(transfer) { 0.3 } else { 1.0 };
        let total = transfer.total().as_secs_f64();
        match (transfer.verified(), transfer.queue(), transfer.processing()) {
            (true, Some(queue), Some(processing)) => {
                let queue = queue.as_secs_f64();
                let processing = processing.as_secs_f64();
                let network = (total - queue - processing).max(0.0);
                let mut base = 0.0;
                for (secs, color) in [(queue, QUEUE), (network, NETWORK), (processing, PROCESSING)]
                {
                    rect(
                        svg,
                        x,
                        y_of(base + secs),
                        width,
                        y_of(base) - y_of(base + secs),
                        color,
                        opacity,
                    );
                    base += secs;
                }
            }
            _ => rect(
                svg,
                x,
                y_of(total),
                width,
                y_of(0.0) - y_of(total),
                FAILED,
                opacity,
            ),
        }
    }
    // x axis: transfer numbers at a few places
    let step = nice_step(count / 6.0).max(1.0);
    let marks: Vec<(f64, String)> = (0..)
        .map(|index| index as f64 * step)
        .take_while(|mark| *mark < count)
        .map(|mark| (BARS_LEFT + slot * (mark + 0.5), format!("{mark}")))
        .collect();
    x_axis(
        svg,
        (BARS_LEFT, BARS_WIDTH, top),
        &marks,
        "transfer, in start order (dashed: batches); bar = intended start to end",
    );
}

/// Throughput over time: each verified transfer's bytes spread evenly
/// over the time it moved data (from admission to its end), in bins.
fn throughput(svg: &mut String, suite: &SuiteRun, summary: &Summary, top: f64) {
    let end = suite.run.duration.as_secs_f64().max(1e-3);
    let bins = 60usize;
    let bin = end / bins as f64;
    let mut bytes = vec![0.0f64; bins];
    for transfer in suite.run.transfers.iter().filter(|t| t.verified()) {
        let queue = transfer.queue().unwrap_or(Duration::ZERO);
        let from = (transfer.dispatched + queue).as_secs_f64().min(end);
        let to = transfer.finished.as_secs_f64().min(end).max(from);
        let size = transfer.size as f64;
        if to - from < 1e-9 {
            let index = ((from / bin) as usize).min(bins - 1);
            bytes[index] += size;
            continue;
        }
        for (index, slot) in bytes.iter_mut().enumerate() {
            let (start, stop) = (index as f64 * bin, (index + 1) as f64 * bin);
            let overlap = (to.min(stop) - from.max(start)).max(0.0);
            *slot += size * overlap / (to - from);
        }
    }
    let rates: Vec<f64> = bytes.iter().map(|bytes| bytes / bin / 1e6).collect();
    let average = summary.throughput_bytes_per_sec / 1e6;
    let peak = rates.iter().copied().fold(average, f64::max);
    let (ticks, y_max) = nice_ticks(peak);
    let y_of = |rate: f64| top + PLOT_HEIGHT - rate / y_max * PLOT_HEIGHT;
    let x_of = |secs: f64| RATE_LEFT + secs / end * RATE_WIDTH;
    axes(svg, RATE_LEFT, RATE_WIDTH, top, &ticks, y_max, "MB/s");
    let mut points = format!("{:.1},{:.1}", x_of(0.0), y_of(0.0));
    for (index, rate) in rates.iter().enumerate() {
        let _ = write!(
            points,
            " {:.1},{:.1} {:.1},{:.1}",
            x_of(index as f64 * bin),
            y_of(*rate),
            x_of((index + 1) as f64 * bin),
            y_of(*rate)
        );
    }
    let _ = write!(points, " {:.1},{:.1}", x_of(end), y_of(0.0));
    let _ = writeln!(
        svg,
        r#"<polygon points="{points}" fill="{RATE}" fill-opacity="0.25" stroke="{RATE}" stroke-width="1.5"/>"#
    );
    let y = y_of(average);
    let _ = writeln!(
        svg,
        r##"<line x1="{RATE_LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#222" stroke-dasharray="6 4"/>"##,
        x2 = RATE_LEFT + RATE_WIDTH
    );
    // Above the line, unless that would touch the frame's top.
    let label_y = if y - 5.0 < top + 14.0 {
        y + 15.0
    } else {
        y - 5.0
    };
    text(
        svg,
        RATE_LEFT + RATE_WIDTH - 4.0,
        label_y,
        12,
        "end",
        "bold",
        &format!("average {average:.2} MB/s"),
    );
    let (time_ticks, time_max) = nice_ticks(end);
    let marks: Vec<(f64, String)> = time_ticks
        .iter()
        .filter(|tick| **tick <= end)
        .map(|tick| (x_of(*tick), label(*tick, time_max)))
        .collect();
    x_axis(
        svg,
        (RATE_LEFT, RATE_WIDTH, top),
        &marks,
        "seconds since the suite started",
    );
}

/// The server's timeline from `--metrics-url`: CPU on the left, active
/// and queued jobs on the right, peaks (and temperature) in the title.
fn server_row(svg: &mut String, samples: &[ServerSample], top: f64) {
    let peak = |value: fn(&ServerSample) -> Option<f64>| {
        samples.iter().filter_map(value).fold(f64::NAN, f64::max)
    };
    let low = |value: fn(&ServerSample) -> Option<f64>| {
        samples.iter().filter_map(value).fold(f64::NAN, f64::min)
    };
    let mut title = format!(
        "server (--metrics-url, {} samples): peak CPU {:.0} %, peak RSS {:.1} MiB",
        samples.len(),
        peak(|s| s.cpu_percent),
        peak(|s| s.resident_bytes) / 1_048_576.0
    );
    if !peak(|s| s.temperature_c).is_nan() {
        let _ = write!(
            title,
            ", temperature {:.1}–{:.1} °C",
            low(|s| s.temperature_c),
            peak(|s| s.temperature_c)
        );
    }
    let _ = writeln!(
        svg,
        r#"<line x1="20" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="{GRID}" stroke-width="2"/>"#,
        y = top + 6.0,
        x2 = WIDTH - 20.0
    );
    text(svg, 20.0, top + 26.0, 14, "start", "bold", &title);
    let top = top + PLOT_TOP;
    let end = samples.last().map_or(1.0, |s| s.t_s).max(1.0);
    let series = |value: fn(&ServerSample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| Some((s.t_s, value(s)?)))
            .collect()
    };
    let cpu = series(|s| s.cpu_percent);
    let (ticks, y_max) = nice_ticks(peak(|s| s.cpu_percent).max(1.0));
    axes(svg, BARS_LEFT, BARS_WIDTH, top, &ticks, y_max, "CPU %");
    polyline(
        svg,
        (BARS_LEFT, BARS_WIDTH, top),
        &cpu,
        end,
        y_max,
        PROCESSING,
    );
    let active = series(|s| s.active_jobs);
    let queued = series(|s| s.queued_jobs);
    let jobs_peak = peak(|s| s.active_jobs)
        .max(peak(|s| s.queued_jobs))
        .max(1.0);
    let (ticks, y_max) = nice_ticks(jobs_peak);
    axes(svg, RATE_LEFT, RATE_WIDTH, top, &ticks, y_max, "jobs");
    polyline(
        svg,
        (RATE_LEFT, RATE_WIDTH, top),
        &active,
        end,
        y_max,
        PROCESSING,
    );
    polyline(
        svg,
        (RATE_LEFT, RATE_WIDTH, top),
        &queued,
        end,
        y_max,
        QUEUE,
    );
    text(
        svg,
        RATE_LEFT + RATE_WIDTH - 4.0,
        top + 16.0,
        12,
        "end",
        "bold",
        "active (blue), queued (orange)",
    );
    let (time_ticks, time_max) = nice_ticks(end);
    for (left, width) in [(BARS_LEFT, BARS_WIDTH), (RATE_LEFT, RATE_WIDTH)] {
        let marks: Vec<(f64, String)> = time_ticks
            .iter()
            .filter(|tick| **tick <= end)
            .map(|tick| (left + tick / end * width, label(*tick, time_max)))
            .collect();
        x_axis(
            svg,
            (left, width, top),
            &marks,
            "seconds since the run started",
        );
    }
}

/// A line through `(seconds, value)` points inside a plot frame.
fn polyline(
    svg: &mut String,
    (left, width, top): (f64, f64, f64),
    points: &[(f64, f64)],
    x_max: f64,
    y_max: f64,
    color: &str,
) {
    if points.is_empty() {
        return;
    }
    let coordinates: Vec<String> = points
        .iter()
        .map(|(x, y)| {
            format!(
                "{:.1},{:.1}",
                left + x / x_max * width,
                top + PLOT_HEIGHT - (y / y_max).min(1.0) * PLOT_HEIGHT
            )
        })
        .collect();
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
        coordinates.join(" ")
    );
}

/// Labels under a plot at the given x positions, and its x axis title.
fn x_axis(
    svg: &mut String,
    (left, width, top): (f64, f64, f64),
    marks: &[(f64, String)],
    title: &str,
) {
    let below = top + PLOT_HEIGHT;
    for (x, mark) in marks {
        text(svg, *x, below + 16.0, 11, "middle", "normal", mark);
    }
    text(
        svg,
        left + width / 2.0,
        below + 34.0,
        12,
        "middle",
        "normal",
        title,
    );
}

/// Frame, horizontal grid lines with labels, and the y axis title.
fn axes(svg: &mut String, left: f64, width: f64, top: f64, ticks: &[f64], y_max: f64, unit: &str) {
    grid(svg, (left, top), (width, PLOT_HEIGHT), ticks, y_max);
    let (x, y) = (left - 52.0, top + PLOT_HEIGHT / 2.0);
    let _ = writeln!(
        svg,
        r#"<text x="{x}" y="{y}" font-size="12" text-anchor="middle" transform="rotate(-90 {x} {y})">{unit}</text>"#
    );
}

/// The start of an SVG document of `width` × `height` on a white page,
/// with `title` at its top left.
pub(crate) fn document(width: f64, height: f64, title: &str) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    text(&mut svg, 20.0, 26.0, 18, "start", "bold", title);
    svg
}

/// A plot area's frame and its horizontal grid lines, each labelled with
/// its value on the left: `(left, top)` and `(width, height)` of the area,
/// the ticks and the value at its top.
pub(crate) fn grid(
    svg: &mut String,
    (left, top): (f64, f64),
    (width, height): (f64, f64),
    ticks: &[f64],
    y_max: f64,
) {
    for tick in ticks {
        let y = top + height - tick / y_max * height;
        let _ = writeln!(
            svg,
            r#"<line x1="{left}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="{GRID}"/>"#,
            x2 = left + width
        );
        text(
            svg,
            left - 6.0,
            y + 4.0,
            11,
            "end",
            "normal",
            &label(*tick, y_max),
        );
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="{AXIS}"/>"#
    );
}

/// Round tick values from 0 to at least `max` (about 5 of them), and the
/// axis maximum (the last tick).
pub(crate) fn nice_ticks(max: f64) -> (Vec<f64>, f64) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let step = nice_step(max / 5.0);
    let count = (max / step).ceil().max(1.0) as usize;
    let ticks: Vec<f64> = (0..=count).map(|index| index as f64 * step).collect();
    let top = ticks.last().copied().unwrap_or(1.0);
    (ticks, top)
}

/// The nearest 1, 2 or 5 × 10^k at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude)
}

/// A tick label with as many decimals as the scale needs.
pub(crate) fn label(value: f64, max: f64) -> String {
    match max {
        max if max >= 10.0 => format!("{value:.0}"),
        max if max >= 1.0 => format!("{value:.1}"),
        max if max >= 0.1 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}

pub(crate) fn rect(
    svg: &mut String,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    color: &str,
    opacity: f64,
) {
    if height <= 0.0 || width <= 0.0 {
        return;
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{x:.2}" y="{y:.2}" width="{width:.2}" height="{height:.2}" fill="{color}" fill-opacity="{opacity}"/>"#
    );
}

pub(crate) fn text(
    svg: &mut String,
    x: f64,
    y: f64,
    size: u32,
    anchor: &str,
    weight: &str,
    content: &str,
) {
    let _ = writeln!(
        svg,
        r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}" fill="{AXIS}" stroke="white" stroke-width="3" paint-order="stroke">{}</text>"#,
        escape(content)
    );
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(30.0), 50.0);
        let (ticks, top) = nice_ticks(7.3);
        assert_eq!(ticks, vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(top, 8.0);
        assert_eq!(nice_ticks(0.0).1, 1.0);
    }

    #[test]
    fn every_transfer_gets_a_bar_and_failures_are_red() {
        use crate::load::Arrival;
        let suite = crate::output::json::tests::suite("basic3", Arrival::Batches(10), Some(10));
        let svg = render(&[suite], Warmup::None, &[], false);
        let fills = |color: &str| svg.matches(&format!(r#"fill="{color}""#)).count();
        // Legend square + one segment per verified transfer (2 of 3).
        for color in [QUEUE, NETWORK, PROCESSING] {
            assert_eq!(fills(color), 1 + 2, "{color}");
        }
        assert_eq!(fills(FAILED), 1 + 1, "the failed transfer");
        assert!(svg.contains("basic3: 2 of 3 verified"), "{svg}");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    /// An interrupted run that ran fewer transfers than planned says so in
    /// its title; one that ran them all, or was not interrupted, does not.
    #[test]
    fn an_interrupted_run_is_marked_in_its_title() {
        use crate::load::Arrival;
        let mut suite = crate::output::json::tests::suite("basic3", Arrival::Batches(10), None);
        let complete = render(std::slice::from_ref(&suite), Warmup::None, &[], true);
        assert!(!complete.contains("INTERRUPTED"), "{complete}");
        suite.plan.clients = 10;
        let cut = render(std::slice::from_ref(&suite), Warmup::None, &[], true);
        assert!(
            cut.contains("basic3: INTERRUPTED after 3 of 10 planned transfers; 2 of 3 verified"),
            "{cut}"
        );
        let not_interrupted = render(&[suite], Warmup::None, &[], false);
        assert!(!not_interrupted.contains("INTERRUPTED"));
    }

    /// With no verified transfer the title's percentiles read "n/a", as
    /// the table's do, not 0.000 s.
    #[test]
    fn an_all_failed_run_has_no_percentiles_in_its_title() {
        use crate::load::Arrival;
        use crate::record::Outcome;
        let mut suite = crate::output::json::tests::suite("basic2", Arrival::Batches(10), None);
        for transfer in &mut suite.run.transfers {
            transfer.outcome = Outcome::Failed {
                kind: "busy".into(),
                message: "busy".into(),
            };
        }
        let svg = render(&[suite], Warmup::None, &[], false);
        assert!(
            svg.contains("0 of 3 verified") && svg.contains("total time p50 n/a, p99 n/a"),
            "{svg}"
        );
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
