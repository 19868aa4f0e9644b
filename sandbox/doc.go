// Package sandbox runs one command under confinement and bounds for
// Armory's tool.cli, tool.python and toolbox tools.
//
// Three backends exist. BackendBwrap runs the command under bubblewrap
// (read-only root, writable workspace, private /tmp, minimal /dev, new
// /proc, new PID/IPC/UTS and network namespaces, no capabilities).
// BackendLandlock re-executes the current binary as a helper that confines
// the file system (and TCP with Landlock ABI >= 4) before exec'ing the
// command; it is the fallback where bwrap is absent or fails its self-test.
// BackendNone runs unconfined and is used only when a Confinement names it.
//
// Every backend applies the same bounds: a timeout after which the whole
// process tree is killed, rlimits (CPU, address space, file size,
// processes, open files) applied to the command only, a process limit (a
// pids cgroup per run where one is usable, else a process-count watchdog),
// per-stream output caps with the rest drained, stdin closed, and a reduced
// environment.
//
// Programs that may use the landlock or none backends must call
// MaybeRunHelper first thing in main (tests: in TestMain).
//
// docs/sandbox.md describes the security model and its limits.
package sandbox
