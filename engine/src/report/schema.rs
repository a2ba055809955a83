//! Output: the JSON schema of the output lines, generated from their types
//! (`serverlab-load --print-schema`, committed as `schema/output.schema.json`).

use schemars::JsonSchema;

use super::{EmitLine, IntervalLine, MeasureLine, Summary};

/// The JSON schema of every output line: an interval, measure, emit or summary line.
pub fn output_schema() -> String {
    #[derive(JsonSchema)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum OutputLine {
        Interval(Box<IntervalLine>),
        Measure(MeasureLine),
        Emit(EmitLine),
        Summary(Box<Summary>),
    }
    let schema = schemars::schema_for!(OutputLine);
    serde_json::to_string_pretty(&schema).expect("schemas serialize") + "\n"
}
