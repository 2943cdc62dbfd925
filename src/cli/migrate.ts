import type { Command } from './command.ts';
import { openContext, printData } from './context.ts';

/** `cinder migrate`: applies pending database migrations and exits. */
export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'Apply pending database migrations',
  usage:
    'cinder migrate [--json]\n\nUses CINDER_DATABASE_URL (or the SQLite file in CINDER_DATA_DIR), and makes the database when there is none\n' +
    '(the SQLite file and its directory; on PostgreSQL, Cinder\'s tables in the database of the URL).\n' +
    'Only this command, serve and tenant create make one: the others refuse to start without it.',
  options: { json: { type: 'boolean' } },
  async run(args, io) {
    const { store } = await openContext(io, {}, false, true);
    try {
      const { applied } = await store.migrate();
      const json = !!args.values.json;
      // JSON lists what was applied, an empty list for none; the text says so in words.
      printData(io, json, { database: store.kind, applied: applied.length || json ? applied : ['(none pending)'] });
      return 0;
    } finally {
      await store.close();
    }
  },
};
