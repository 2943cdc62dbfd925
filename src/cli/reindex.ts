import { fhirBaseOf } from '../config.ts';
import { reindex } from '../fhir/reindex.ts';
import type { Command } from './command.ts';
import { openContext, printData } from './context.ts';
import { formatCount } from './progress.ts';

/** `cinder reindex`: rebuilds the search index of every stored resource. */
export const reindexCommand: Command = {
  name: 'reindex',
  summary: 'Rebuild the search index (resumable; serve runs it at start when needed)',
  usage:
    'cinder reindex [--if-needed] [--json]\n\nRebuilds the search index rows of every current resource, in batches, printing progress.\n' +
    'With --if-needed it does so only when the database holds rows of an older index model (what serve does at start),\n' +
    'and only for the resources whose rows the newer models change, resuming an interrupted run where it stopped.\n' +
    'Uses CINDER_DATABASE_URL (or the SQLite file in CINDER_DATA_DIR).',
  options: { 'if-needed': { type: 'boolean' }, json: { type: 'boolean' } },
  async run(args, io) {
    const { config, store } = await openContext(io, {}, true);
    try {
      const started = performance.now();
      let last = started;
      const result = await reindex(store, {
        force: !args.values['if-needed'],
        fhirBase: (tenant) => fhirBaseOf(config.baseUrl, tenant),
        onProgress: ({ done, rebuilt }) => {
          if (performance.now() - last < 2000) return;
          last = performance.now();
          io.stderr(`examined ${formatCount(done)} resources, reindexed ${formatCount(rebuilt)}\n`);
        },
      });
      const seconds = (performance.now() - started) / 1000;
      printData(io, !!args.values.json, { reindexed: result.rebuilt, examined: result.done, seconds: Math.round(seconds * 10) / 10, ran: result.ran });
      return 0;
    } finally {
      await store.close();
    }
  },
};
