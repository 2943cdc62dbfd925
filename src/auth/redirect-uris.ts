/**
 * Redirect URIs (RFC 6749 3.1.2, RFC 9700 2.1 and 4.1, RFC 8252 7): what may be registered, and whether
 * an authorization request's `redirect_uri` is one of a client's.
 */

/**
 * Schemes a browser resolves itself, running script or showing inline or local content, instead of
 * asking a web server or handing the URI to an installed app: a code sent to one is an XSS or a leak,
 * never a delivery to the client. Every other scheme is https, http or a native app's private-use
 * scheme (RFC 8252 7.1, `com.example.app:/callback`).
 */
const BROWSER_SCHEMES = new Set(['javascript:', 'vbscript:', 'data:', 'blob:', 'filesystem:', 'file:', 'about:']);

/** The scheme of `uri` when it is one of BROWSER_SCHEMES (as the URL parser reads it: any case, leading blanks). */
function browserScheme(uri: string): string | null {
  if (!URL.canParse(uri)) return null;
  const { protocol } = new URL(uri);
  return BROWSER_SCHEMES.has(protocol) ? protocol : null;
}

/** Why `uri` may not be registered as a redirect URI, or null when it may. */
export function redirectUriProblem(uri: string): string | null {
  // The URL parser drops surrounding blanks and tabs or newlines inside: a URI that would never match as written.
  if (/[\s\x00-\x1f\x7f]/.test(uri)) return 'it contains a blank or a control character';
  if (!URL.canParse(uri)) return 'it is not an absolute URI';
  if (uri.includes('#')) return 'it has a fragment (RFC 6749 3.1.2)';
  const scheme = browserScheme(uri);
  if (scheme !== null) {
    return `the ${scheme} scheme is handled by the browser itself, not by an app; use https (http for a loopback address), or a native app's private-use scheme such as com.example.app:/callback`;
  }
  return null;
}

/**
 * A loopback IP literal redirect URI (RFC 8252 7.3: `127.0.0.1`, `[::1]`) as written, split around its
 * port: the scheme and host, the port (absent: the scheme's default), and the rest (path and query).
 * `localhost` is no loopback IP literal (RFC 8252 8.3: NOT RECOMMENDED; the name may resolve to another
 * interface than the loopback), so it is matched exactly, port included.
 */
const LOOPBACK = /^(https?:\/\/(?:127\.0\.0\.1|\[::1\]))(?::(\d{1,5}))?([/?][^#]*)?$/i;

/** `requested` is `registered` but for the port, both loopback IP literal URIs (RFC 8252 7.3). */
function sameButPort(registered: string, requested: string): boolean {
  const r = LOOPBACK.exec(registered);
  const q = r ? LOOPBACK.exec(requested) : null;
  if (!r || !q || !URL.canParse(requested) || (q[2] !== undefined && Number(q[2]) > 65535)) return false;
  return q[1] === r[1] && (q[3] ?? '') === (r[3] ?? '');
}

/**
 * Whether `requested` is one of the `registered` redirect URIs: the same string (RFC 9700 2.1: exact
 * matching), or, for a registered loopback IP literal URI, the same string but for the port (RFC 8252
 * 7.3: "The authorization server MUST allow any port to be specified at the time of the request for
 * loopback IP redirect URIs", as a native app listens on whatever port the system gives it). A registered
 * URI of a browser scheme (stored by an older release) matches nothing.
 */
export function isRegisteredRedirectUri(registered: readonly string[], requested: string): boolean {
  return registered.some((uri) => browserScheme(uri) === null && (uri === requested || sameButPort(uri, requested)));
}
