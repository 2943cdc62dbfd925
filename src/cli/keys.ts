import type { Command } from './command.ts';
import { openContext, printData } from './context.ts';

/** `cinder keys rotate`: new signing keys; the old ones stop signing and stay published until their tokens expire. */
export const keysRotateCommand: Command = {
  name: 'keys rotate',
  summary: 'Rotate the token signing keys',
  usage:
    'cinder keys rotate [--json]\n\n' +
    'Adds a new ES256 (access tokens) and RS256 (id_tokens) key. The previous keys stop signing (running\n' +
    'servers switch within a minute) and stay in /oauth2/jwks until every token they signed has expired.',
  options: { json: { type: 'boolean' } },
  async run(args, io) {
    const { store, keys } = await openContext(io);
    try {
      await keys.init();
      const kids = await keys.rotate();
      printData(io, !!args.values.json, { new_kids: kids });
      return 0;
    } finally {
      await store.close();
    }
  },
};
