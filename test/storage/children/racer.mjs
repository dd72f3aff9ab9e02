// Child process for the SQLite race test: waits for "go <round>" lines on
// stdin, appends one batch at revision round * size, and answers with one
// JSON line saying whether it won or which error code it got.
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const [modulePath, directory, namespace, role, batchSize] = process.argv.slice(2);
const moduleUrl = pathToFileURL(modulePath);
const { createLocalRunStorage } = await import(moduleUrl.href);
const { defaultStoragePolicy } = await import(new URL('../policy.js', moduleUrl).href);
const storage = createLocalRunStorage({ directory, namespace, policy: defaultStoragePolicy });
const size = Number(batchSize);
const answer = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

answer({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'exit') break;
  const round = Number(line.split(' ')[1]);
  const events = Array.from({ length: size }, (_, i) => ({ id: `${role}-${round}-${i}`, type: 'race', data: { role, round, i } }));
  try {
    const result = await storage.eventStore.append('race', round * size, events);
    answer({ round, outcome: 'won', revision: result.revision });
  } catch (error) {
    answer({ round, outcome: error.code ?? 'error', message: String(error.message) });
  }
}
await storage.close();
process.exit(0);
