import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * libpq's connection parameter key words (libpq-connect "Parameter Key Words"): what a service file may set. Another
 * key word is a syntax error, as libpq reports it; those Cinder cannot honour are refused afterwards, as in the URL.
 */
const KEY_WORDS = new Set([
  'host', 'hostaddr', 'port', 'dbname', 'user', 'password', 'passfile', 'require_auth', 'channel_binding', 'connect_timeout',
  'client_encoding', 'options', 'application_name', 'fallback_application_name', 'keepalives', 'keepalives_idle',
  'keepalives_interval', 'keepalives_count', 'tcp_user_timeout', 'replication', 'gssencmode', 'sslmode', 'sslnegotiation',
  'requiressl', 'sslcompression', 'sslcert', 'sslkey', 'sslkeylogfile', 'sslpassword', 'sslcertmode', 'sslrootcert', 'sslcrl',
  'sslcrldir', 'sslsni', 'requirepeer', 'ssl_min_protocol_version', 'ssl_max_protocol_version', 'min_protocol_version',
  'max_protocol_version', 'krbsrvname', 'gsslib', 'gssdelegation', 'target_session_attrs', 'load_balance_hosts',
  'scram_client_key', 'scram_server_key', 'oauth_issuer', 'oauth_client_id', 'oauth_client_secret', 'oauth_scope',
]);

/** A service's settings, and the file they were read from (for messages). */
export interface Service {
  name: string;
  file: string;
  settings: Map<string, string>;
}

/**
 * The settings of service `name` as libpq finds them (libpq-pgservice): in the user's file (`servicefile`, else
 * PGSERVICEFILE, else `~/.pg_service.conf`), and when that file is missing or does not define it, in
 * `$PGSYSCONFDIR/pg_service.conf` (libpq's built-in directory, which differs between builds, is not guessed: set
 * PGSYSCONFDIR). A RangeError as libpq's for a service defined nowhere, a line that is not `key=value`, a key word libpq
 * does not know, or a nested `service`.
 */
export function readService(name: string, userFile: string | undefined, env: Record<string, string | undefined>, home: string): Service {
  const files = [userFile || env.PGSERVICEFILE || join(home, '.pg_service.conf')];
  if (env.PGSYSCONFDIR) files.push(join(env.PGSYSCONFDIR, 'pg_service.conf'));
  for (const file of files) {
    if (!existsSync(file)) continue;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new RangeError(`cannot read the service file '${file}': ${(err as Error).message}`);
    }
    const settings = serviceSettings(text, name, file);
    if (settings) return { name, file, settings };
  }
  throw new RangeError(`definition of service '${name}' not found (looked in ${files.join(' and ')})`);
}

/** The settings of group `[name]` of a service file's `text`, or undefined when it has none (libpq's parseServiceFile). */
function serviceSettings(text: string, name: string, file: string): Map<string, string> | undefined {
  let found: Map<string, string> | undefined;
  const lines = text.split('\n');
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/\s+$/, '').replace(/^\s+/, '');
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('[')) {
      // The group after the one asked for ends it.
      if (found) return found;
      if (line.startsWith(`[${name}]`)) found = new Map();
      continue;
    }
    if (!found) continue;
    const eq = line.indexOf('=');
    const key = eq === -1 ? '' : line.slice(0, eq);
    if (key === 'service' || key === 'servicefile') throw new RangeError(`nested service specifications not supported in service file '${file}', line ${i + 1}`);
    if (!KEY_WORDS.has(key)) throw new RangeError(`syntax error in service file '${file}', line ${i + 1}`);
    // The first setting of a key word stands, as libpq keeps the first.
    if (!found.has(key)) found.set(key, line.slice(eq + 1));
  }
  return found;
}
