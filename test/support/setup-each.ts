import { afterAll, aroundEach } from 'vitest';
import { stopTestProcesses, withTestProcesses } from './processes.js';

// Every test file: the processes a test started with startTestProcess end with that test, however it
// ended (also under it.concurrent); those started outside a test end with the file.
aroundEach((runTest) => withTestProcesses(runTest));
afterAll(stopTestProcesses);
