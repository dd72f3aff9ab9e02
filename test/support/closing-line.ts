import type { Reporter, TestModule } from 'vitest/node';
import { collectStrays, describeStrays } from './strays.js';

/**
 * Ends a test run with one plain line, `tests: N passed, N failed, N skipped`,
 * that any tool reading the output can count without knowing vitest. Processes
 * the tests left running fail the run here (named, and killed), and the line
 * says how many.
 */
export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped += 1;
      }
      if (module.state() === 'failed' && module.children.size === 0) failed += 1;
    }
    const strays = collectStrays();
    if (strays.length > 0) {
      process.stdout.write(describeStrays(strays));
      process.exitCode = 1;
    }
    const left = strays.length > 0 ? `, ${strays.length} stray process${strays.length === 1 ? '' : 'es'}` : '';
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped${left}\n`);
  }
}
