import { AdminError } from '../auth/admin.ts';
import { createUser } from '../auth/users.ts';
import { UsageError, type Command } from './command.ts';
import { openContext, printData } from './context.ts';

function text(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** The password from standard input: the first line, without its line ending. */
async function readPassword(stdin: () => Promise<string>): Promise<string> {
  const input = await stdin();
  const password = input.split(/\r?\n/)[0] ?? '';
  if (!password) throw new UsageError('--password-stdin: no password on standard input');
  return password;
}

/** `cinder user create`: a user who signs in at /oauth2/authorize (password read from stdin, argon2id). */
export const userCreateCommand: Command = {
  name: 'user create',
  summary: 'Create a user who can sign in at /oauth2/authorize',
  usage:
    'cinder user create --tenant <id> --username <u> --password-stdin [--email <e>] [--email-verified]\n' +
    '                   [--name <n>] [--phone <p>] [--phone-verified] [--address <a>] [--fhir-user <ref>] [--json]\n\n' +
    'The password is the first line of standard input, e.g. `printf %s "$PW" | cinder user create ...`.\n' +
    '--fhir-user is a reference such as Patient/123 or Practitioner/7. A Patient, RelatedPerson or Person user\n' +
    'holds user/ scopes as patient/ ones (their own record, or the patients their record names); staff read\n' +
    'the tenant with them.',
  options: {
    tenant: { type: 'string' },
    username: { type: 'string' },
    'password-stdin': { type: 'boolean' },
    email: { type: 'string' },
    'email-verified': { type: 'boolean' },
    name: { type: 'string' },
    phone: { type: 'string' },
    'phone-verified': { type: 'boolean' },
    address: { type: 'string' },
    'fhir-user': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(args, io) {
    const v = args.values;
    if (typeof v.tenant !== 'string') throw new UsageError('--tenant is required');
    if (typeof v.username !== 'string') throw new UsageError('--username is required');
    if (!v['password-stdin']) throw new UsageError('--password-stdin is required (passwords are never taken as arguments)');
    const password = await readPassword(io.stdin);
    const { store, clock } = await openContext(io);
    try {
      const user = await createUser(store, clock, {
        tenant: v.tenant, username: v.username, password, email: text(v.email), emailVerified: !!v['email-verified'], name: text(v.name),
        phone: text(v.phone), phoneVerified: !!v['phone-verified'], address: text(v.address), fhirUser: text(v['fhir-user']),
      });
      printData(io, !!v.json, { user_id: user.id, tenant: user.tenant, username: user.username, fhir_user: user.fhirUser ?? undefined });
      return 0;
    } catch (err) {
      if (err instanceof AdminError) throw new UsageError(err.message);
      throw err;
    } finally {
      await store.close();
    }
  },
};
