import { afterEach } from 'vitest';
import { stopTestProcesses } from './processes.js';

// Every test file: processes a test started with startTestProcess end with the test, however it ended.
afterEach(stopTestProcesses);
