import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Runs the machine's openssl in `dir` with `args`: an Error naming the subcommand when it fails. */
export function runOpenssl(dir: string, ...args: string[]): void {
  const r = Bun.spawnSync([Bun.which('openssl')!, ...args], { cwd: dir, stderr: 'pipe' });
  if (r.exitCode !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr.toString()}`);
}

/**
 * Writes into `dir` two authorities: ca.pem signs server.pem (for db.invalid) and client.pem (the client's certificate,
 * its key encrypted with the password 'pw'); other.pem signs nothing here.
 */
export function testCertificates(dir: string): void {
  const run = (...args: string[]) => runOpenssl(dir, ...args);
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Cinder test CA');
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other.key', '-out', 'other.pem', '-days', '2', '-subj', '/CN=Other CA');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=db.invalid');
  writeFileSync(join(dir, 'ext'), 'subjectAltName=DNS:db.invalid\n');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext');
  run('req', '-newkey', 'rsa:2048', '-passout', 'pass:pw', '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=cinder-client');
  run('x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.pem', '-days', '2');
}
