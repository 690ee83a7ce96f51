//! The configuration the JVM agent gets from `run` and `attach`
//! (agent.conf: the user's `--config` file, then the command-line options,
//! then the output directory).

use crate::options::TraceArgs;
use crate::user::User;
use anyhow::{bail, Context};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest `--config` file read: 1 MiB. A JPMT configuration is a
/// few lines of directives and patterns (thousands of them fit).
const MAX_CONFIG: u64 = 1 << 20;

/// A JPMT configuration file given with `--config`.
struct UserConfig {
    path: PathBuf,
    text: String,
}

impl UserConfig {
    /// Reads `path` with `user`'s rights: root does not open a file the
    /// user names (its lines end up in the user's agent.conf and in the
    /// agent's messages), so a file that user cannot read is an error. A
    /// regular file of at most [`MAX_CONFIG`] bytes: no FIFO or device
    /// (`/dev/zero` would fill root's memory), no file larger than any
    /// configuration.
    fn read(path: &Path, user: &User) -> anyhow::Result<UserConfig> {
        let text = user.run_as(|| {
            let read = || -> std::io::Result<String> {
                let file = jtrace_symbols::bounded_read::open_regular(path)?;
                let mut text = String::new();
                file.take(MAX_CONFIG + 1).read_to_string(&mut text)?;
                if text.len() as u64 > MAX_CONFIG {
                    return Err(std::io::Error::other(format!(
                        "larger than {} KiB, more than any configuration",
                        MAX_CONFIG >> 10
                    )));
                }
                Ok(text)
            };
            read().with_context(|| format!("cannot read config {} as uid {}", path.display(), user.uid.as_raw()))
        })?;
        Ok(UserConfig {
            path: path.to_path_buf(),
            text,
        })
    }

    /// Its `output` directive, if any (used when -o is absent).
    fn output(&self) -> Option<PathBuf> {
        self.text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("output"))
                .then(|| w.next().map(PathBuf::from))
                .flatten()
        })
    }
}

/// Where the trace goes and what the agent is told.
pub(crate) struct AgentSetup {
    /// The trace directory (absolute).
    pub(crate) out: PathBuf,
    /// The contents of agent.conf.
    pub(crate) conf: String,
}

impl TraceArgs {
    /// Reads `--config` as `user` and builds the agent's configuration,
    /// before anything touches the disk (bad input leaves nothing behind);
    /// `stacks`: the recording takes stacks (forwarders then get no probes:
    /// their blocking time comes from the stacks).
    pub(crate) fn agent_setup(&self, user: &User, stacks: bool) -> anyhow::Result<AgentSetup> {
        let config = self.config.as_deref().map(|p| UserConfig::read(p, user)).transpose()?;
        let out = self
            .output
            .clone()
            .or_else(|| config.as_ref().and_then(UserConfig::output))
            .unwrap_or_else(|| PathBuf::from("trace.jtrace"));
        let out = std::path::absolute(&out)?;
        let mut conf = agent_config(config.as_ref(), &self.methods, self.alloc_samples, &out)?;
        if self.complete {
            conf.push_str("overhead_budget off\n");
        } else {
            conf.push_str(&format!("overhead_budget {}\n", self.overhead_budget));
            // Trivial methods (getters, setters) get no probes: jtrace_format::TRIVIAL_RULE.
            conf.push_str("skip_trivial on\n");
            if self.skip_forwarders || (stacks && !self.keep_forwarders) {
                conf.push_str("skip_forwarders on\n");
            }
        }
        if let Some(d) = self.min_duration {
            let ns = d.as_nanos();
            if ns >= 1 << 31 {
                bail!("--min-duration must be below 2.1 s");
            }
            conf.push_str(&format!("min_duration_ns {ns}\n"));
        }
        Ok(AgentSetup { out, conf })
    }
}

impl AgentSetup {
    /// The configuration with another output directory: `dir`, as the
    /// JVM sees it (a directory in its container).
    pub(crate) fn conf_with_output(&self, dir: &str) -> String {
        let mut conf = String::new();
        for line in self.conf.lines() {
            match line.strip_prefix("output ") {
                Some(_) => conf.push_str(&format!("output {dir}")),
                None => conf.push_str(line),
            }
            conf.push('\n');
        }
        conf
    }
}

/// The agent's configuration: the user's JPMT file (minus `output`), then
/// `--methods` rules and `--alloc-samples`, then the output directory. The
/// user's lines keep their numbers, so that the agent's error messages point
/// at the right line.
fn agent_config(
    config: Option<&UserConfig>,
    methods: &[String],
    alloc_samples: bool,
    out: &Path,
) -> anyhow::Result<String> {
    let mut conf = String::new();
    if let Some(UserConfig { path, text }) = config {
        for line in text.lines() {
            if line.split_whitespace().next() == Some("output") {
                conf.push_str("# (output set by jtrace) ");
            }
            conf.push_str(line);
            conf.push('\n');
        }
        conf.push_str(&format!("# the lines above are {}\n", path.display()));
    }
    conf.push_str("# written by jtrace\n");
    for m in methods {
        let m = m.trim();
        if m.is_empty() || m.chars().any(char::is_whitespace) {
            bail!("--methods pattern {m:?} is empty or contains white space");
        }
        conf.push_str(&format!("include_method {m}\n"));
    }
    if alloc_samples {
        conf.push_str("object_allocation on\n");
    }
    conf.push_str(&format!("output {}\n", out.display()));
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_elsewhere() {
        let setup = AgentSetup {
            out: PathBuf::from("/t/x.jtrace"),
            conf:
                "include_method A.*\n# (output set by jtrace) output /elsewhere\noutput /t/x.jtrace\nskip_trivial on\n"
                    .into(),
        };
        assert_eq!(
            setup.conf_with_output("/tmp/.jtrace-1"),
            "include_method A.*\n# (output set by jtrace) output /elsewhere\noutput /tmp/.jtrace-1\nskip_trivial on\n"
        );
    }

    #[test]
    fn config_lines_keep_their_numbers_and_output_is_jtraces() {
        let cfg = UserConfig {
            path: "/u/my.conf".into(),
            text: "include_method A.*\noutput /elsewhere\n".into(),
        };
        assert_eq!(cfg.output(), Some(PathBuf::from("/elsewhere")));
        let conf = agent_config(Some(&cfg), &["B.run".into()], true, Path::new("/t/x.jtrace")).unwrap();
        assert_eq!(
            conf,
            "include_method A.*\n# (output set by jtrace) output /elsewhere\n# the lines above are /u/my.conf\n\
             # written by jtrace\ninclude_method B.run\nobject_allocation on\noutput /t/x.jtrace\n"
        );
        assert!(agent_config(None, &["a b".into()], false, Path::new("/t")).is_err());
    }
}
