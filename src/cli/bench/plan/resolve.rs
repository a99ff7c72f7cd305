//! The parsed flags checked against this machine: algorithms available, connectivities
//! supported, memory enough, peers runnable.

use super::super::peer_setup;
use super::super::spec::{invalid, join, BackendChoice, Size};
use super::memory::{check_memory, Limits};
use super::pipeline::{pipeline_default_runs, resolve_pipeline};
use super::{AlgorithmChoice, BenchPlan, ParsedArgs, PipelinePlan};
use crate::ccl::{algorithm_info, algorithms, AlgorithmInfo, Backends, Connectivity};
use crate::error::{Error, Result};

/// What runs on every pipeline scene: (connectivity, algorithm).
type Runs = Vec<(Connectivity, &'static AlgorithmInfo)>;

impl BenchPlan {
    /// Checks the parsed flags against this machine: algorithms available, connectivities
    /// supported, memory enough, peers runnable.
    pub fn resolve(p: ParsedArgs, backends: &Backends, limits: &Limits) -> Result<BenchPlan> {
        let mut notes = Vec::new();
        if p.backend == BackendChoice::Cuda {
            if let Some(reason) = backends.cuda_unavailable_reason() {
                return Err(Error::CudaUnavailable(format!("--backend cuda: {reason}")));
            }
        }
        // --pipeline without --algorithms: each backend's default, per connectivity.
        let default_runs = match (&p.pipeline, &p.algorithms) {
            (Some(_), AlgorithmChoice::Default) => {
                Some(pipeline_default_runs(&p, backends, &mut notes)?)
            }
            _ => None,
        };
        let selected = match &default_runs {
            Some(runs) => algorithms_of_runs(runs),
            None => select_algorithms(&p, backends, &mut notes)?,
        };
        if selected.is_empty() {
            return Err(invalid(
                "algorithms",
                format!(
                    "no algorithm to run with --backend {} (available here: {})",
                    p.backend.as_str(),
                    join(backends.available().map(|a| a.name.to_string()), ", ")
                ),
            ));
        }
        if default_runs.is_none() {
            note_unsupported_connectivities(&selected, &p.connectivities, &mut notes);
        }
        check_memory(&p, &selected, limits)?;
        let pipeline = match &p.pipeline {
            None => None,
            Some(flags) => {
                let runs = default_runs.unwrap_or_else(|| every_run(&p.connectivities, &selected));
                Some(resolve_pipeline(flags, runs, limits)?)
            }
        };
        let sizes = sizes_with_scenes(p.sizes, pipeline.as_ref());
        let peers = if p.peers {
            Some(peer_setup::setup(p.backend, backends)?)
        } else {
            None
        };
        Ok(BenchPlan {
            sizes,
            densities: p.densities,
            granularities: p.granularities,
            connectivities: p.connectivities,
            algorithms: selected,
            backend: p.backend,
            modes: p.modes,
            repeat: p.repeat,
            seed: p.seed,
            json: p.json,
            plot: p.plot,
            peers,
            latency: p.latency,
            pipeline,
            notes,
        })
    }
}

/// The algorithms of the pipeline's default runs, each once, in order.
fn algorithms_of_runs(runs: &Runs) -> Vec<&'static AlgorithmInfo> {
    let mut v: Vec<&'static AlgorithmInfo> = Vec::new();
    for (_, info) in runs {
        if !v.iter().any(|a| a.name == info.name) {
            v.push(info);
        }
    }
    v
}

/// `--algorithms` on `--backend`: every available one but the oracle, or the named ones (each
/// of them on that backend, available here and supporting a connectivity asked for).
fn select_algorithms(
    p: &ParsedArgs,
    backends: &Backends,
    notes: &mut Vec<String>,
) -> Result<Vec<&'static AlgorithmInfo>> {
    let names = match &p.algorithms {
        AlgorithmChoice::Named(names) => names,
        AlgorithmChoice::Default | AlgorithmChoice::All => {
            let v: Vec<_> = algorithms()
                .iter()
                .filter(|a| {
                    !a.is_oracle && p.backend.includes(a.backend) && backends.is_available(a)
                })
                .collect();
            if p.backend == BackendChoice::All {
                if let Some(reason) = backends.cuda_unavailable_reason() {
                    notes.push(format!("CUDA algorithms skipped: {reason}"));
                }
            }
            return Ok(v);
        }
    };
    let mut v = Vec::new();
    for n in names {
        let info = algorithm_info(n)?;
        if !p.backend.includes(info.backend) {
            return Err(invalid(
                "algorithms",
                format!(
                    "'{}' runs on the {} backend but --backend is {}",
                    info.name,
                    info.backend,
                    p.backend.as_str()
                ),
            ));
        }
        if !backends.is_available(info) {
            return Err(Error::CudaUnavailable(format!(
                "algorithm '{}' is not available on this machine: {}",
                info.name,
                backends.cuda_unavailable_reason().unwrap_or_default()
            )));
        }
        if !p.connectivities.iter().any(|c| info.supports(*c)) {
            return Err(invalid(
                "algorithms",
                format!(
                    "'{}' supports {}-connectivity only, and --connectivity asks for {}",
                    info.name,
                    join(info.connectivities.iter().map(|c| c.to_string()), "/"),
                    join(p.connectivities.iter().map(|c| c.to_string()), ",")
                ),
            ));
        }
        v.push(info);
    }
    Ok(v)
}

/// A note for each selected algorithm that skips a connectivity asked for.
fn note_unsupported_connectivities(
    selected: &[&AlgorithmInfo],
    connectivities: &[Connectivity],
    notes: &mut Vec<String>,
) {
    for a in selected {
        for c in connectivities {
            if !a.supports(*c) {
                notes.push(format!(
                    "{} skipped for {c}-connectivity (it does not support it)",
                    a.name
                ));
            }
        }
    }
}

/// Every selected algorithm at every connectivity it supports, connectivity by connectivity.
fn every_run(connectivities: &[Connectivity], selected: &[&'static AlgorithmInfo]) -> Runs {
    connectivities
        .iter()
        .flat_map(|&c| {
            selected
                .iter()
                .filter(move |a| a.supports(c))
                .map(move |&a| (c, a))
        })
        .collect()
}

/// The sizes in the report's inputs: the scenes' too with `--pipeline`.
fn sizes_with_scenes(mut sizes: Vec<Size>, pipeline: Option<&PipelinePlan>) -> Vec<Size> {
    for s in pipeline.iter().flat_map(|pl| &pl.scenes) {
        if !sizes.contains(&s.size) {
            sizes.push(s.size);
        }
    }
    sizes
}
