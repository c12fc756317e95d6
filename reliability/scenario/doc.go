// Package scenario is leash's reliability suite: real redis-servers, real
// holder processes, and faults — partitions, pauses, kills, restarts,
// script-cache flushes, busy scripts — injected while clients contend for
// locks. Each test records a history (package history) and checks it
// (package check); RELIABILITY.md is built from the figures it reports.
// The code is in the test files; this file only names the package.
package scenario
