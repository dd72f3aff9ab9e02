/**
 * The repair module of src/automerge/repair/, as the loop calls it.
 */
import { repairConfigFrom, runRepair } from '../repair/index.js';
import type { RepairModule } from './types.js';

export const builtinRepair: RepairModule = { runRepair, repairConfigFrom };
