/** The database file inside the storage directory. */
export const DATABASE_FILE = 'proofgate.sqlite';
/** `PRAGMA application_id` of a proofgate database: ASCII "PRFG". */
export const APPLICATION_ID = 0x50524647;
/** The schema version this build writes (`PRAGMA user_version` and the meta table). */
export const SQLITE_SCHEMA_VERSION = 1;
