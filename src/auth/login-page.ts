import { createHash } from 'node:crypto';

/** HTML-escapes text for element content and double-quoted attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
main{max-width:24rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:8px;box-shadow:0 1px 4px #0002}
h1{font-size:1.5rem;margin:0 0 1rem}label{display:block;margin-top:1rem;font-weight:600}
input{box-sizing:border-box;width:100%;padding:.5rem;margin-top:.25rem;font:inherit;border:1px solid #6b7280;border-radius:4px}
input:focus,button:focus{outline:3px solid #2563eb;outline-offset:1px}
.actions{display:flex;gap:.75rem;margin-top:1.5rem}
button{font:inherit;padding:.5rem 1rem;border-radius:4px;border:1px solid #1d4ed8;background:#1d4ed8;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#1d4ed8}
.error{color:#b91c1c;background:#fef2f2;border:1px solid #fecaca;padding:.5rem .75rem;border-radius:4px}
ul{padding-left:1.25rem}code{font-size:.9em}
.search{display:flex;gap:.5rem;align-items:flex-end}.search input{flex:1}
fieldset{border:1px solid #d1d5db;border-radius:4px;margin:1rem 0 0;padding:.5rem .75rem}legend{font-weight:600;padding:0 .25rem}
.choice{display:flex;gap:.5rem;align-items:baseline;padding:.35rem 0}.choice input{width:auto;margin:0}
.choice label{display:inline;margin:0;font-weight:400}.meta{display:block;color:#4b5563;font-size:.875rem}
.note{color:#4b5563}
`;

/** CSP hash of the one inline stylesheet, so `style-src` needs no 'unsafe-inline'. */
export const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

const SCOPE_TEXT: Record<string, string> = {
  openid: 'Confirm who you are',
  profile: 'Your name',
  email: 'Your email address',
  phone: 'Your phone number',
  address: 'Your postal address',
  fhirUser: 'Your FHIR user record',
  offline_access: 'Keep access when you are not using the app',
  offline: 'Keep access when you are not using the app',
  'launch/patient': 'Know which patient record it is for (yours, or one you choose)',
  launch: 'Know which patient record it was opened for (and the encounter and other records open with it)',
  'launch/encounter': 'Know which encounter it was opened for',
};

function scopeItem(scope: string): string {
  const text = SCOPE_TEXT[scope];
  return `<li>${text ? escapeHtml(text) : 'Health data access'} <code>${escapeHtml(scope)}</code></li>`;
}

/** A whole page: the one stylesheet (allowed by STYLE_HASH), no script. */
export function htmlPage(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)} · Cinder</title><style>${STYLE}</style></head>
<body><main>${body}</main></body></html>`;
}

export interface LoginPageModel {
  clientName: string;
  scopes: string[];
  /** The authorization request parameters, carried as hidden fields. */
  params: Record<string, string>;
  csrfToken: string;
  username?: string;
  error?: string;
}

/** Hidden form fields carrying `fields` (the authorization request's parameters, the CSRF token, ...). */
export function hiddenInputs(fields: Record<string, string>): string {
  return Object.entries(fields)
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
    .join('\n');
}

/** The sign-in form of `/oauth2/authorize`: plain HTML, no script, labelled fields, errors announced. */
export function loginPage(m: LoginPageModel): string {
  const hidden = hiddenInputs(m.params);
  const invalid = m.error ? ' aria-invalid="true" aria-describedby="login-error"' : '';
  return htmlPage('Sign in', `
<h1>Sign in</h1>
<p><strong>${escapeHtml(m.clientName)}</strong> asks to:</p>
<ul>${m.scopes.map(scopeItem).join('')}</ul>
${m.error ? `<p class="error" id="login-error" role="alert">${escapeHtml(m.error)}</p>` : ''}
<form method="post" action="authorize">
${hidden}
<input type="hidden" name="csrf_token" value="${escapeHtml(m.csrfToken)}">
<label for="username">Username</label>
<input id="username" name="username" type="text" autocomplete="username" autocapitalize="none" spellcheck="false" required maxlength="128" value="${escapeHtml(m.username ?? '')}"${invalid}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024"${invalid}>
<div class="actions">
<button type="submit" name="action" value="login">Sign in</button>
<button type="submit" name="action" value="cancel" class="secondary" formnovalidate>Cancel</button>
</div>
</form>`);
}

/** A page for a request that cannot be sent back to the application (RFC 6749 4.1.2.1, first paragraph). */
export function errorPage(title: string, message: string): string {
  return htmlPage(title, `<h1>${escapeHtml(title)}</h1>\n<p role="alert">${escapeHtml(message)}</p>`);
}
