//! The tables of the docs (Markdown), as tests read them to check that the
//! docs and the code say the same (flags, defaults, JSON fields).

/// The data rows of the first table after `heading` in `file` (a path
/// from the workspace root) whose header row starts with `header` (`"|"`
/// for any): each row's cells, trimmed, the leading and trailing empty
/// ones left out; an escaped `\|` inside a cell is a `|` of the cell.
/// Panics, naming the file, when the file or the heading is missing.
pub fn doc_table_rows(file: &str, heading: &str, header: &str) -> Vec<Vec<String>> {
    let path = format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{file}: {err}"));
    table_rows(&text, heading, header).unwrap_or_else(|| panic!("{file} has no {heading:?}"))
}

/// [`doc_table_rows`] of a document's `text`; `None` without `heading`.
fn table_rows(text: &str, heading: &str, header: &str) -> Option<Vec<Vec<String>>> {
    let section = text.split_once(heading)?.1;
    let rows = section
        .lines()
        .skip_while(|line| !line.starts_with(header))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(table_cells)
        .collect();
    Some(rows)
}

/// The cells of a table row `| a | b \| c |`: `["a", "b | c"]`.
fn table_cells(line: &str) -> Vec<String> {
    let line = line.replace("\\|", "\u{0}");
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    // A row starts and ends with `|`: the first and last pieces are empty.
    let inner = match cells.as_slice() {
        [_, inner @ .., _] => inner,
        _ => &[],
    };
    inner
        .iter()
        .map(|cell| cell.replace('\u{0}', "|"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_trimmed_and_an_escaped_bar_stays_in_its_cell() {
        assert_eq!(table_cells("| `--a` | x \\| y |"), ["`--a`", "x | y"]);
    }

    #[test]
    fn the_rows_of_the_table_with_that_header_after_the_heading() {
        let text = "\
| flag | default |
| --- | --- |
| --before | 0 |

## Flags

| other | table |
| --- | --- |
| skipped | too |

| flag | default |
| --- | --- |
| --one | 1 |
| --two | 2 |

after the table
";
        let rows = table_rows(text, "## Flags\n", "| flag").expect("heading");
        assert_eq!(rows, [["--one", "1"], ["--two", "2"]]);
        let any = table_rows(text, "## Flags\n", "|").expect("heading");
        assert_eq!(any, [["skipped", "too"]]);
        assert!(table_rows(text, "## Nowhere", "|").is_none());
    }
}
