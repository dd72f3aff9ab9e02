import { afterAll, aroundEach } from 'vitest';
import { closeGitObjectReaders } from '../../src/host/git-reader.js';
import { stopTestProcesses, withTestProcesses } from './processes.js';

// Every test file: the processes a test started with startTestProcess end with that test, however it
// ended (also under it.concurrent); those started outside a test end with the file.
aroundEach((runTest) => withTestProcesses(runTest));
afterAll(stopTestProcesses);
// proofgate's persistent git object readers (src/host/git-reader.ts) end with the file too.
afterAll(closeGitObjectReaders);
