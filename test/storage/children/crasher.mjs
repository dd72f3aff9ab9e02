// Child process for the crash test: appends large batches back to back and
// prints "done <revision>" after each, until the parent kills it (SIGKILL).
import { pathToFileURL } from 'node:url';

const [modulePath, provider, location, namespace, batchSize, payloadBytes] = process.argv.slice(2);
const moduleUrl = pathToFileURL(modulePath);
const { defaultStoragePolicy } = await import(new URL('../policy.js', moduleUrl).href);
const adapter = await import(moduleUrl.href);
const storage =
  provider === 'sqlite'
    ? adapter.createLocalRunStorage({ directory: location, namespace, policy: defaultStoragePolicy })
    : await adapter.createPostgresRunStorage({ connectionString: location, namespace, policy: defaultStoragePolicy, maxConnections: 1 });
const size = Number(batchSize);
const filler = 'x'.repeat(Number(payloadBytes));

let revision = await storage.eventStore.revision('crash');
process.stdout.write('ready\n');
for (let batch = 0; ; batch += 1) {
  const events = Array.from({ length: size }, (_, i) => ({ id: `crash-${revision + i + 1}`, type: 'crash', data: { batch, i, filler } }));
  revision = (await storage.eventStore.append('crash', revision, events)).revision;
  process.stdout.write(`done ${revision}\n`);
}
