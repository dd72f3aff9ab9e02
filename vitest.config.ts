import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Many tests start real processes (git, the built CLI, checks): limits that fit a loaded 2-core machine.
    // A limit finds a hang; it is never a speed check. Measured: the GitHub rebase-repair test takes 4 s
    // alone, 33-54 s with six busy loops on the two cores, and passed 120 s beside a second copy of the
    // suite on a slow day. One limit for every test and hook; only the few files that need more say so.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    // Separate processes (native SQLite, process groups, signals). Three workers on this 2-core machine:
    // much of a test's time is spent waiting on the processes it starts (git, checks, the jail), and a
    // third worker fills that time (measured, idle machine: 197 s with 2 workers, 167 s with 3, 193 s with 4).
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 3,
    // A worker process runs file after file and keeps its modules loaded: a fresh process and
    // module graph per file cost about a third of the CPU of the in-process tests. Modules are
    // therefore evaluated once per worker, not per file: nothing here mocks modules or stubs
    // globals, setup-each.ts (re-run per file) holds the per-file hooks, and a test that
    // changes process.env restores it.
    isolate: false,
    // The run's own TMPDIR and process marker, and the stray-process check at the end.
    globalSetup: ['./test/support/run-guard.ts'],
    // Processes a test starts (test/support/processes.ts) end with the test.
    setupFiles: ['./test/support/setup-each.ts'],
    reporters: ['default', './test/support/closing-line.ts'],
  },
});
