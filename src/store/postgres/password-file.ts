import { readFileSync, statSync } from 'node:fs';

/** What a connection is looked up by in a password file: as libpq resolved it for one host. */
export interface PasswordKey {
  host: string;
  port: string;
  database: string;
  user: string;
}

/**
 * The directories libpq is commonly built to take as its default socket's (upstream `/tmp`, Debian's and Red Hat's
 * `/var/run/postgresql`), which it matches as `localhost` (libpq passwordFromFile compares the host with its own
 * DEFAULT_PGSOCKET_DIR). Which one that is differs between builds: a line naming the directory is looked for first (what a
 * libpq built for another directory matches, Debian's psql for `/tmp`), then one naming `localhost`.
 */
const DEFAULT_SOCKET_DIRS = new Set(['/tmp', '/var/run/postgresql', '/run/postgresql']);

/** The hosts a password file's line may name for a connection to `host`, in the order they are looked for. */
export function passwordFileHosts(host: string): string[] {
  if (host === '') return ['localhost'];
  const dir = host.replace(/(.)\/+$/, '$1');
  return DEFAULT_SOCKET_DIRS.has(dir) ? [host, 'localhost'] : [host];
}

/**
 * The rest of a password file's line after its field matching `token` (`*` matches anything; `\` escapes `:` and `\`),
 * or undefined when the field does not match (libpq pwdfMatchesString).
 */
function matchField(line: string, token: string): string | undefined {
  if (line.startsWith('*:')) return line.slice(2);
  let i = 0;
  let t = 0;
  while (i < line.length) {
    let escaped = false;
    if (line[i] === '\\') {
      // A `\` ending the line escapes nothing, and matches nothing.
      if (++i === line.length) return undefined;
      escaped = true;
    }
    if (line[i] === ':' && !escaped && t === token.length) return line.slice(i + 1);
    if (t === token.length || line[i] !== token[t]) return undefined;
    i++;
    t++;
  }
  return undefined;
}

/** A password field: up to its first unescaped `:`, its escapes removed. */
function unescapePassword(field: string): string {
  let out = '';
  for (let i = 0; i < field.length && field[i] !== ':'; i++) {
    if (field[i] === '\\' && i + 1 < field.length) i++;
    out += field[i];
  }
  return out;
}

/** A password file's contents, or why libpq would not read it (a warning), or nothing when there is no file. */
export type PasswordFile = { lines: string[] } | { warning: string } | undefined;

/**
 * Reads the password file at `path` as libpq does: none when it does not exist; ignored, with libpq's warning, when it
 * is not a plain file or when its group or others may read or write it (permissions should be u=rw, 0600, or less).
 */
export function readPasswordFile(path: string): PasswordFile {
  let mode: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) return { warning: `password file '${path}' is not a plain file: not read` };
    mode = st.mode;
  } catch {
    return undefined;
  }
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    return { warning: `password file '${path}' has group or world access; permissions should be u=rw (0600) or less: not read` };
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { warning: `cannot read the password file '${path}': ${(err as Error).message}` };
  }
  return { lines: text.split('\n').map((l) => l.replace(/\r$/, '')) };
}

/**
 * The password file at `path` as it is when the returned function is called: looked at (stat) on each call, read again
 * (readPasswordFile) only when its inode, size, mode, modification or change time differ from the last read's, as libpq
 * reads it for each connection without reading it on each one.
 */
export function watchedPasswordFile(path: string): () => PasswordFile {
  let seen: string | undefined;
  let file: PasswordFile;
  return () => {
    let stamp = 'none';
    try {
      const st = statSync(path);
      stamp = `${st.ino}:${st.size}:${st.mode}:${st.mtimeMs}:${st.ctimeMs}`;
    } catch {
      // gone: none, as readPasswordFile says
    }
    if (stamp !== seen) {
      file = readPasswordFile(path);
      seen = stamp;
    }
    return file;
  };
}

/**
 * The password of the first line of `lines` (`hostname:port:database:username:password`) that matches `key` (for a
 * default socket directory, naming it, else `localhost`: passwordFileHosts), or
 * undefined: comment lines (`#` first) and empty ones skipped; an empty database or user name matches nothing.
 */
export function passwordFor(lines: string[], key: PasswordKey): string | undefined {
  if (key.database === '' || key.user === '') return undefined;
  for (const host of passwordFileHosts(key.host)) {
    for (const line of lines) {
      if (line === '' || line.startsWith('#')) continue;
      let rest: string | undefined = line;
      for (const token of [host, key.port, key.database, key.user]) {
        rest = matchField(rest, token);
        if (rest === undefined) break;
      }
      if (rest !== undefined) return unescapePassword(rest);
    }
  }
  return undefined;
}
