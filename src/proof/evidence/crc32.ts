import { loadZlib } from '../../host/index.js';

type Crc32 = (data: Uint8Array, value?: number) => number;

let table: Uint32Array | null = null;

/** CRC-32 (ISO-HDLC, the ZIP one) by table, for Node 20 releases whose zlib has no `crc32`. */
function tableCrc32(data: Uint8Array, value = 0): number {
  if (table === null) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n += 1) {
      let c = n;
      for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
  }
  let crc = ~value >>> 0;
  for (let i = 0; i < data.length; i += 1) crc = (table[(crc ^ (data[i] as number)) & 0xff] as number) ^ (crc >>> 8);
  return ~crc >>> 0;
}

let chosen: Crc32 | undefined;

/** zlib's CRC-32 when Node has it (20.15 and later), else the table's; zlib is loaded on the first call. */
function choose(): Crc32 {
  const native = (loadZlib() as { crc32?: Crc32 }).crc32;
  return typeof native === 'function' ? native : tableCrc32;
}

/** CRC-32 of `data`, continuing from `value` (0 to start). */
export const crc32: Crc32 = (data, value = 0) => (chosen ??= choose())(data, value);

/** The table implementation, exported so a test can hold it against zlib's. */
export const crc32ByTable: Crc32 = tableCrc32;
