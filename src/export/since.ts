import { FhirError } from '../errors.ts';

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?([Zz]|([+\- ])(\d{2})(?::?(\d{2}))?)$/;

/**
 * Parses `_since` (a FHIR instant) in any ISO 8601 offset form: `Z`, `+02:00`, `+0200`, `+02`, and a
 * space where an unencoded `+` was form-decoded. Returns epoch ms.
 */
export function parseSince(raw: string): number {
  const m = INSTANT.exec(raw);
  const fail = () => new FhirError('invalid', `Invalid _since '${raw}': expected an instant such as 2024-01-31T12:00:00Z or 2024-01-31T14:00:00+02:00`, { expression: ['_since'] });
  if (!m) throw fail();
  const [, y, mo, d, h, mi, s, frac, zone, sign, zh, zm] = m;
  const month = Number(mo) - 1;
  const day = Number(d);
  if (month > 11 || day < 1 || day > 31 || Number(h) > 23 || Number(mi) > 59 || Number(s ?? 0) > 60) throw fail();
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  const local = Date.UTC(Number(y), month, day, Number(h), Number(mi), Number(s ?? 0), ms);
  if (new Date(local).getUTCDate() !== day) throw fail();
  if (zone === 'Z' || zone === 'z') return local;
  const offset = (Number(zh) * 60 + Number(zm ?? 0)) * (sign === '-' ? -1 : 1);
  if (Number(zh) > 14 || Number(zm ?? 0) > 59) throw fail();
  return local - offset * 60000;
}
