//! `serverlab-load`: parse flags into a validated plan, run it, print the result.
//! Exit codes: 0 the run happened, 1 it failed, 2 the plan was refused, 3 a run from flags (a
//! person at the command line) got no answer at all. A run from `--plan FILE` (the
//! orchestrator's way) exits 0 then: its summary says `answered: 0`, and the caller judges.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serverlab_load::cli::Args;
use serverlab_load::merge::Output;
use serverlab_load::plan::PlanErrors;
use serverlab_load::{check, report, Controls, IntervalLine, Line, Outcome, Summary};

/// The exit code of a run from flags that got no answer at all.
const NO_ANSWER: u8 = 3;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if args.print_schema {
        print!("{}", report::output_schema());
        return ExitCode::SUCCESS;
    }
    if args.print_facts {
        print!("{}", serverlab_load::plan::engine_facts());
        return ExitCode::SUCCESS;
    }
    if !args.merge.is_empty() {
        return merge(&args);
    }
    if args.check {
        return check(args);
    }
    let json = args.json;
    let by_hand = args.plan.is_none();
    let plan = match args
        .into_plan()
        .map_err(PlanErrors::from)
        .and_then(|p| p.validate())
    {
        Ok(plan) => plan,
        Err(errors) => {
            // One line per refusal: every mistake of the plan at once, not one per attempt.
            for e in &errors.0 {
                eprintln!("serverlab-load: plan refused: {e}");
            }
            return ExitCode::from(2);
        }
    };
    if let Some(name) = &plan.plan.netns {
        // Before the signal handlers, the workers and every socket: all inherit it.
        if let Err(e) = serverlab_load::system::enter_netns(name) {
            eprintln!("serverlab-load: {e}");
            return ExitCode::from(2);
        }
    }
    let expects_answers = !plan.plan.behaviour.kind().is_attack();
    match run(plan, json) {
        Ok(summary) if by_hand && expects_answers && summary.attempts.answered == 0 => {
            ExitCode::from(NO_ANSWER)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serverlab-load: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// `--check`: the plan the flags (or `--plan FILE`) make, or else every JSON Lines plan on
/// stdin, judged without running; one verdict line each.
fn check(args: Args) -> ExitCode {
    let from_flags = args.url.is_some() || args.plan.is_some();
    let all_ok = if from_flags {
        let verdict = check::verdict(args.into_plan());
        println!("{verdict}");
        verdict["ok"] == true
    } else {
        match check::check_lines(std::io::stdin().lock(), std::io::stdout().lock()) {
            Ok(all_ok) => all_ok,
            Err(e) => {
                eprintln!("serverlab-load: --check: {e}");
                return ExitCode::from(1);
            }
        }
    };
    ExitCode::from(if all_ok { 0 } else { 2 })
}

/// `--merge FILE...`: several engines' outputs of one run as one output.
fn merge(args: &Args) -> ExitCode {
    if args.run_flags_given() {
        eprintln!("serverlab-load: --merge takes output files and --json only");
        return ExitCode::from(2);
    }
    let merged = match serverlab_load::merge::merge_files(&args.merge) {
        Ok(merged) => merged,
        Err(e) => {
            eprintln!("serverlab-load: --merge: {e}");
            return ExitCode::from(2);
        }
    };
    match print_merged(&mut std::io::stdout().lock(), merged, args.json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serverlab-load: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// A merge is printed as a run is: its interval lines (JSON only), emit lines, summary.
fn print_merged(out: &mut impl Write, merged: Output, json: bool) -> anyhow::Result<()> {
    if json {
        for line in &merged.intervals {
            write_json(out, line)?;
        }
    }
    let outcome = Outcome {
        emits: merged.emits,
        summary: merged.summary,
    };
    print_outcome(out, &outcome, json)
}

fn run(plan: serverlab_load::ValidPlan, json: bool) -> anyhow::Result<Summary> {
    let stop_requested = stop_on_signals()?;
    let measure = Arc::new(AtomicBool::new(false));
    if plan.plan.warmup_max_s.is_some() {
        measure_on_stdin(measure.clone());
    }
    let controls = Controls {
        stop: &stop_requested,
        measure: &measure,
    };
    let progress = progress_bar();
    let mut stdout = std::io::stdout().lock();
    let mut write_error = None;
    let outcome = serverlab_load::run_controlled(plan, &controls, |line| {
        if let (Some(bar), Line::Interval(line)) = (&progress, &line) {
            bar.set_message(progress_text(line));
        }
        if json && write_error.is_none() {
            write_error = match line {
                Line::Interval(line) => write_json(&mut stdout, line),
                Line::Measure(line) => write_json(&mut stdout, line),
                Line::Emit(line) => write_json(&mut stdout, line),
            }
            .err();
        }
    })?;
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if let Some(e) = write_error {
        return Err(e);
    }
    print_outcome(&mut stdout, &outcome, json)?;
    Ok(outcome.summary)
}

/// SIGTERM or SIGINT ends the run early with a summary of what happened until then (the
/// orchestrator stops the engine this way when a server dies); a second one exits at once.
fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        signal_hook::flag::register_conditional_shutdown(signal, 1, flag.clone())?;
        signal_hook::flag::register(signal, flag.clone())?;
    }
    Ok(flag)
}

/// A plan with a warm-up phase ends it when a line `measure` arrives on stdin. A line on
/// stdin rather than a signal: it reaches the engine itself whatever wraps it (taskset, a
/// namespace, a remote generator's pipe), it cannot hit another process that took a dead
/// engine's pid, and it says which request it is. Other lines are ignored; at the end of
/// stdin the warm-up runs to its cap.
fn measure_on_stdin(measure: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            match line {
                Ok(line) if line.trim() == "measure" => {
                    measure.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
}

/// Emit lines come before the summary, so a reader that stops at the summary has them all.
fn print_outcome(out: &mut impl Write, outcome: &Outcome, json: bool) -> anyhow::Result<()> {
    let summary = &outcome.summary;
    if json {
        for line in &outcome.emits {
            write_json(out, line)?;
        }
        write_json(out, summary)
    } else {
        out.write_all(summary.human().as_bytes())?;
        Ok(())
    }
}

fn write_json(out: &mut impl Write, line: &impl serde::Serialize) -> anyhow::Result<()> {
    write_text(out, &serde_json::to_string(line)?)
}

/// One output line, flushed: a reader sees each line as it is made.
fn write_text(out: &mut impl Write, text: &str) -> anyhow::Result<()> {
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// A progress line on stderr, only when a person is watching it.
fn progress_bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").ok()?);
    Some(bar)
}

fn progress_text(line: &IntervalLine) -> String {
    format!(
        "{} done, {:.0} answers/s, {} open, {} errors",
        line.completed_total,
        line.rps,
        line.open_connections,
        line.errors.total()
    )
}
