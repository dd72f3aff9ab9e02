import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Many tests start real processes (git, the built CLI, checks): limits that fit a loaded 2-core machine.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Separate processes (native SQLite, process groups, signals); one worker per core, as the tests'
    // own child processes keep both cores busy.
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    // The run's own TMPDIR and process marker, and the stray-process check at the end.
    globalSetup: ['./test/support/run-guard.ts'],
    // Processes a test starts (test/support/processes.ts) end with the test.
    setupFiles: ['./test/support/setup-each.ts'],
    reporters: ['default', './test/support/closing-line.ts'],
  },
});
