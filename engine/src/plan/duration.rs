//! Plan stage: durations as flags write them; a leaf, so that a behaviour's flags can parse
//! theirs without reaching the plan's parser.

/// Parses `10s`, `250ms`, `2m`, `1h`, or plain seconds (`1.5`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 10s, 500ms or 2m"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("{text:?} is not a non-negative duration"));
    }
    Ok(std::time::Duration::from_secs_f64(value * scale))
}
