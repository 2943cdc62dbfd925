import type { Command } from './command.ts';
import { openContext, printData } from './context.ts';

/** `cinder migrate`: applies pending database migrations and exits. */
export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'Apply pending database migrations',
  usage: 'cinder migrate [--json]\n\nUses CINDER_DATABASE_URL (or the SQLite file in CINDER_DATA_DIR).',
  options: { json: { type: 'boolean' } },
  async run(args, io) {
    const { store } = await openContext(io, {}, false);
    try {
      const { applied } = await store.migrate();
      printData(io, !!args.values.json, { database: store.kind, applied: applied.length ? applied : ['(none pending)'] });
      return 0;
    } finally {
      await store.close();
    }
  },
};
