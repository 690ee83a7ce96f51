//! Which container a cgroup path belongs to: the runtimes name a
//! container's cgroup after its id (64 hex digits) with a prefix of their
//! own, and Kubernetes names a pod's after its UID.
//!
//! | runtime | cgroup (cgroupfs driver / systemd driver) |
//! |---|---|
//! | Docker | `/docker/<id>` / `/system.slice/docker-<id>.scope` |
//! | podman | `/libpod_parent/libpod-<id>` / `/machine.slice/libpod-<id>.scope` (rootless: under `user@UID.service`) |
//! | containerd (CRI) | `/kubepods/<qos>/pod<uid>/<id>` / `…/kubepods-<qos>-pod<uid_>.slice/cri-containerd-<id>.scope` |
//! | CRI-O | `…/pod<uid>/crio-<id>` / `…/crio-<id>.scope` |
//!
//! A runtime's own processes beside the container (podman's conmon:
//! `libpod-conmon-<id>.scope`) are not the container.

use serde::Serialize;

/// The container and the Kubernetes pod a cgroup path names, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContainerId {
    /// The container's id (64 lower-case hex digits), innermost in the path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The runtime the path's naming shows (`docker`, `podman`,
    /// `containerd`, `cri-o`; `unknown` for a bare id under a pod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<&'static str>,
    /// The Kubernetes pod's UID (with dashes), where the path has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
}

/// Prefixes of a container's cgroup name, and the runtime each shows.
const PREFIXES: [(&str, &str); 5] = [
    ("docker-", "docker"),
    ("libpod-", "podman"),
    ("cri-containerd-", "containerd"),
    ("crio-", "cri-o"),
    ("containerd-", "containerd"),
];

/// What `cgroup` (a path as in `/proc/PID/cgroup`) says of a container.
pub fn container_of(cgroup: &str) -> ContainerId {
    let parts: Vec<&str> = cgroup.split('/').filter(|p| !p.is_empty()).collect();
    let mut found = ContainerId::default();
    for (i, part) in parts.iter().enumerate().rev() {
        if found.pod_uid.is_none() {
            found.pod_uid = pod_uid(part);
        }
        if found.container_id.is_some() {
            continue;
        }
        let name = part.strip_suffix(".scope").unwrap_or(part);
        if name.starts_with("libpod-conmon-") {
            continue;
        }
        let (id, runtime) = match PREFIXES.iter().find_map(|(p, r)| Some((name.strip_prefix(p)?, *r))) {
            Some(x) => x,
            // cgroupfs names: `/docker/<id>`, `…/pod<uid>/<id>`.
            None if i > 0 && parts[i - 1] == "docker" => (name, "docker"),
            None if i > 0 && pod_uid(parts[i - 1]).is_some() => (name, "unknown"),
            None => continue,
        };
        if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            found.container_id = Some(id.to_ascii_lowercase());
            found.runtime = Some(runtime);
        }
    }
    found
}

/// ` (podman container d90a9823fe01, pod <uid>)`: what [`container_of`]
/// finds in `cgroup`, for the text views (the id cut to 12 digits, as the
/// runtimes' own listings show it); empty if nothing.
pub fn describe(cgroup: &str) -> String {
    let c = container_of(cgroup);
    let mut parts = Vec::new();
    if let (Some(id), Some(runtime)) = (&c.container_id, c.runtime) {
        let runtime = if runtime == "unknown" {
            String::new()
        } else {
            format!("{runtime} ")
        };
        parts.push(format!("{runtime}container {}", &id[..12]));
    }
    if let Some(pod) = &c.pod_uid {
        parts.push(format!("pod {pod}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// The pod UID in a cgroup name: `pod<uid>` (cgroupfs) or
/// `kubepods-<qos>-pod<uid with _ for ->.slice` (systemd).
fn pod_uid(part: &str) -> Option<String> {
    let name = part.strip_suffix(".slice").unwrap_or(part);
    let at = name.rfind("pod")?;
    let uid = name[at + 3..].replace('_', "-");
    let groups: Vec<&str> = uid.split('-').collect();
    let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12];
    (shape && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))).then(|| uid.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "d90a9823fe0192c4e27fecec6ae0d1c612f290bdba421fea031bc553897aa240";
    const POD: &str = "0f9c3c0e-5b5e-4a3c-9a51-3f2a1b7c8d9e";

    fn id(cgroup: &str) -> (Option<String>, Option<&'static str>, Option<String>) {
        let c = container_of(cgroup);
        (c.container_id, c.runtime, c.pod_uid)
    }

    #[test]
    fn each_runtimes_naming_gives_the_container() {
        let some = |r| (Some(ID.to_string()), Some(r), None);
        assert_eq!(id(&format!("/libpod_parent/libpod-{ID}")), some("podman"));
        assert_eq!(id(&format!("/machine.slice/libpod-{ID}.scope")), some("podman"));
        assert_eq!(
            id(&format!(
                "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
            )),
            some("podman")
        );
        assert_eq!(id(&format!("/docker/{ID}")), some("docker"));
        assert_eq!(id(&format!("/system.slice/docker-{ID}.scope")), some("docker"));
        let pod_underscored = POD.replace('-', "_");
        assert_eq!(
            id(&format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{pod_underscored}.slice/\
                 cri-containerd-{ID}.scope"
            )),
            (Some(ID.into()), Some("containerd"), Some(POD.into()))
        );
        assert_eq!(
            id(&format!("/kubepods/burstable/pod{POD}/{ID}")),
            (Some(ID.into()), Some("unknown"), Some(POD.into()))
        );
        assert_eq!(
            id(&format!(
                "/kubepods.slice/kubepods-pod{pod_underscored}.slice/crio-{ID}.scope"
            )),
            (Some(ID.into()), Some("cri-o"), Some(POD.into()))
        );
    }

    #[test]
    fn described_with_the_short_id() {
        assert_eq!(
            describe(&format!("/libpod_parent/libpod-{ID}")),
            " (podman container d90a9823fe01)"
        );
        assert_eq!(
            describe(&format!("/kubepods/burstable/pod{POD}/{ID}")),
            format!(" (container d90a9823fe01, pod {POD})")
        );
        assert_eq!(describe("/user.slice"), "");
    }

    #[test]
    fn no_container_where_the_path_names_none() {
        let none = (None, None, None);
        assert_eq!(id("/"), none);
        assert_eq!(id("/user.slice/user-1000.slice/session-3.scope"), none);
        assert_eq!(id("/system.slice/docker.service"), none);
        // podman's monitor beside the container is not the container.
        assert_eq!(id(&format!("/machine.slice/libpod-conmon-{ID}.scope")), none);
        // Not 64 hex digits.
        assert_eq!(id("/docker/abc"), none);
        assert_eq!(id(&format!("/libpod_parent/libpod-{}", &ID[..63])), none);
        // A pod with no container below it yet.
        assert_eq!(id(&format!("/kubepods/pod{POD}")), (None, None, Some(POD.into())));
    }
}
