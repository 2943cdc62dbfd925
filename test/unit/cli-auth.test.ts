import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/index.ts';
import type { CliIO } from '../../src/cli/command.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { exportJWK, generateKeyPair } from 'jose';
import { migratedSqliteFile } from '../helpers/stores.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cinder-cli-'));
  migratedSqliteFile(join(dir, 'cinder.db')); // as `cinder migrate` leaves it: the commands make no database
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function run(argv: string[], stdin = '') {
  let out = '';
  let err = '';
  const io: CliIO = {
    env: { CINDER_DATA_DIR: dir, CINDER_LOG_LEVEL: 'silent' },
    stdout: (s) => void (out += s), stderr: (s) => void (err += s), stdin: async () => stdin, isTTY: false,
  };
  const code = await runCli(argv, io);
  return { code, out, err };
}

describe('cinder tenant create', () => {
  test('a tenant id taken or refused is a usage error (2), as a duplicate user or an unknown tenant is', async () => {
    expect((await run(['tenant', 'create', 'taken'])).code).toBe(0);
    const taken = await run(['tenant', 'create', 'taken']);
    expect(taken.code).toBe(2);
    expect(taken.err).toContain("tenant 'taken' already exists");
    const bad = await run(['tenant', 'create', 'Bad Id']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain("invalid tenant id 'Bad Id'");
  });
});

describe('cinder user create', () => {
  test('creates a user with an argon2id password read from stdin, at OWASP\'s parameters (19 MiB, two passes)', async () => {
    expect((await run(['tenant', 'create', 'acme'])).code).toBe(0);
    const r = await run(
      ['user', 'create', '--tenant', 'acme', '--username', 'dr.who', '--password-stdin', '--email', 'who@example.org', '--email-verified',
        '--name', 'The Doctor', '--phone', '+44 20 7946 0000', '--fhir-user', 'Practitioner/42', '--json'],
      's3cret-passw0rd\n',
    );
    expect(r.code).toBe(0);
    const printed = JSON.parse(r.out) as { user_id: string; username: string; fhir_user: string };
    expect(printed).toMatchObject({ username: 'dr.who', tenant: 'acme', fhir_user: 'Practitioner/42' });
    const store = createSqliteStore(join(dir, 'cinder.db'));
    const user = (await store.users.byUsername('acme', 'dr.who'))!;
    await store.close();
    expect(user).toMatchObject({ id: printed.user_id, email: 'who@example.org', emailVerified: true, name: 'The Doctor', phoneVerified: false });
    // Test users' hashes are made cheaper (test/helpers/oauth.ts testUser): these are the ones a user is given.
    expect(user.passwordHash).toStartWith('$argon2id$v=19$m=19456,t=2,p=1$');
    expect(await Bun.password.verify('s3cret-passw0rd', user.passwordHash)).toBe(true);
  });

  test('usage errors: no --password-stdin, empty password, short password, duplicate, unknown tenant', async () => {
    await run(['tenant', 'create', 'acme']);
    expect((await run(['user', 'create', '--tenant', 'acme', '--username', 'u'])).code).toBe(2);
    expect((await run(['user', 'create', '--tenant', 'acme', '--username', 'u', '--password-stdin'], '')).code).toBe(2);
    const short = await run(['user', 'create', '--tenant', 'acme', '--username', 'u', '--password-stdin'], 'short');
    expect(short.code).toBe(2);
    expect(short.err).toContain('at least 8 characters');
    expect((await run(['user', 'create', '--tenant', 'acme', '--username', 'u', '--password-stdin'], 'long-enough')).code).toBe(0);
    const dup = await run(['user', 'create', '--tenant', 'acme', '--username', 'u', '--password-stdin'], 'long-enough');
    expect(dup.code).toBe(2);
    expect(dup.err).toContain('already exists');
    expect((await run(['user', 'create', '--tenant', 'nope', '--username', 'u', '--password-stdin'], 'long-enough')).code).toBe(2);
    expect((await run(['user', 'create', '--tenant', 'acme', '--username', 'v', '--password-stdin', '--fhir-user', 'Observation/1'], 'long-enough')).code).toBe(2);
  });

  test('--help', async () => {
    const r = await run(['user', 'create', '--help']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('--password-stdin');
  });
});

describe('command groups', () => {
  test('`cinder client --help` lists the client commands; a group alone or with an unknown word lists them as an error', async () => {
    const help = await run(['client', '--help']);
    expect(help.code).toBe(0);
    for (const c of ['client create', 'client list', 'client disable', 'client rotate-secret']) expect(help.out).toContain(c);
    expect(help.out).not.toContain('user create');
    const bare = await run(['user']);
    expect(bare.code).toBe(2);
    expect(bare.err).toContain("cinder user: a subcommand is needed");
    expect(bare.err).toContain('user disable');
    const unknown = await run(['audit', 'purge']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("unknown command 'audit purge'");
    expect(unknown.err).toContain('audit prune');
    expect(unknown.err).not.toContain('client create');
  });
});

describe('cinder keys rotate', () => {
  test('adds new ES256 and RS256 keys; the old ones stay published', async () => {
    const first = await run(['keys', 'rotate', '--json']);
    expect(first.code).toBe(0);
    const second = await run(['keys', 'rotate', '--json']);
    const kids = (JSON.parse(second.out) as { new_kids: string[] }).new_kids;
    expect(kids).toHaveLength(2);
    const store = createSqliteStore(join(dir, 'cinder.db'));
    const published = await store.keys.list(Date.now() - 86400_000);
    await store.close();
    const active = published.filter((k) => k.retiredAt === null).map((k) => k.kid).sort();
    expect(active).toEqual([...kids].sort());
    expect(published.length).toBe(6);
  });
});

describe('cinder client create', () => {
  async function clients(tenant: string) {
    const store = createSqliteStore(join(dir, 'cinder.db'));
    try {
      return await store.clients.list(tenant);
    } finally {
      await store.close();
    }
  }
  const app = ['client', 'create', '--tenant', 'acme', '--grant', 'authorization_code', '--redirect-uri', 'https://app.example/cb'];

  test('a public client (--no-secret, no keys) with the refresh_token grant is refused, saying why; without it, or confidential, it is registered', async () => {
    await run(['tenant', 'create', 'acme']);
    const r = await run([...app, '--grant', 'refresh_token', '--no-secret']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('a public client (--no-secret without --jwks-url or --jwks-file) may not have the refresh_token grant');
    expect(r.err).toContain('RFC 9700 2.2.2');
    expect(await clients('acme')).toEqual([]);

    const jwksFile = join(dir, 'jwks.json');
    const { publicKey } = await generateKeyPair('ES256', { extractable: true });
    await Bun.write(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] }));
    const created = [
      await run([...app, '--no-secret', '--json']),
      await run([...app, '--grant', 'refresh_token', '--json']),
      await run([...app, '--grant', 'refresh_token', '--no-secret', '--jwks-file', jwksFile, '--json']),
    ];
    expect(created.map((c) => [c.code, c.err])).toEqual([[0, ''], [0, ''], [0, '']]);
    expect(created.map((c) => 'client_secret' in (JSON.parse(c.out) as object))).toEqual([false, true, false]);
    expect(await clients('acme')).toHaveLength(3);
  });
});

describe('cinder client create --redirect-uri', () => {
  const create = (uri: string) =>
    run(['client', 'create', '--tenant', 'acme', '--grant', 'authorization_code', '--no-secret', '--redirect-uri', uri, '--json']);

  test('refuses browser schemes (javascript:, data:, vbscript:, file:, blob:, ...), fragments and blanks; takes https, http and private-use schemes', async () => {
    await run(['tenant', 'create', 'acme']);
    const refused: [string, string][] = [
      ['javascript:alert(1)', 'the javascript: scheme is handled by the browser itself'],
      ['JavaScript:alert(1)', 'the javascript: scheme'],
      [' javascript:alert(1)', 'it contains a blank or a control character'],
      ['java\tscript:alert(1)', 'it contains a blank or a control character'],
      ['data:text/html,<script>alert(1)</script>', 'the data: scheme'],
      ['vbscript:msgbox(1)', 'the vbscript: scheme'],
      ['file:///etc/passwd', 'the file: scheme'],
      ['blob:https://app.example/5b1f3c2e-0000-4000-8000-000000000000', 'the blob: scheme'],
      ['filesystem:https://app.example/temporary/cb', 'the filesystem: scheme'],
      ['about:blank', 'the about: scheme'],
      ['https://app.example/cb#frag', 'it has a fragment'],
      ['/cb', 'it is not an absolute URI'],
    ];
    for (const [uri, reason] of refused) {
      const r = await create(uri);
      expect([uri, r.code]).toEqual([uri, 2]);
      expect(r.err).toContain(`invalid redirect URI '${uri}': ${reason}`);
    }
    for (const uri of ['https://app.example/cb', 'http://127.0.0.1/cb', 'http://localhost:3000/cb', 'com.example.app:/callback', 'com.example.app://cb?x=1']) {
      const r = await create(uri);
      expect([uri, r.code, r.err]).toEqual([uri, 0, '']);
    }
  });
});
