// Package bench measures sandbox start-up latency: sbx's own scenarios
// (cold one-shot runs, in-process runs, and later ready, exec, session,
// churn and density) side by side with the runtimes users would pick
// instead (runc, crun, bwrap, docker, podman), on the same root filesystem,
// with warm-up, interleaved rounds and a per-phase breakdown of sbx's time.
//
// A Scenario is a set of Subjects measured in the same rounds; Run returns
// a Report that the report package prints as a table, JSON or a plot.
package bench
