/**
 * A FHIR R4 `date` / `dateTime` read as the period it names: "2021" is the whole year 2021,
 * "2021-05-10T08:00:00Z" the single second. A value without a time has no time zone; it is
 * read as UTC.
 */
export interface DatePeriod {
  /** The value as given, for messages. */
  readonly text: string;
  /** First millisecond of the period (epoch ms). */
  readonly start: number;
  /** Last millisecond of the period (epoch ms). */
  readonly end: number;
}

// FHIR R4 dateTime (datatypes 2.24.0.1): YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss(.s+)(Z|+hh:mm|-hh:mm).
const DATE_TIME = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2}))?)?)?$/;

/** Parses a FHIR R4 dateTime into its period; null when it is not one or names no real date. */
export function parseDateTime(text: string): DatePeriod | null {
  const m = DATE_TIME.exec(text);
  if (m === null) return null;
  const [year, month = 1, day = 1, hour = 0, minute = 0, second = 0] = m.slice(1, 7).map((p) => (p === undefined ? undefined : Number(p)));
  if (year === undefined || year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 60) return null;
  if (m[2] === undefined) return { text, start: utc(year, 0, 1), end: utc(year + 1, 0, 1) - 1 };
  if (m[3] === undefined) return { text, start: utc(year, month - 1, 1), end: utc(year, month, 1) - 1 };
  if (m[4] === undefined) return { text, start: utc(year, month - 1, day), end: utc(year, month - 1, day + 1) - 1 };
  const offset = zoneOffsetMinutes(m[8] as string);
  if (offset === null) return null;
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(`0${m[7]}`) * 1000);
  const start = utc(year, month - 1, day, hour, minute, Math.min(second, 59)) + fraction - offset * 60_000;
  return { text, start, end: m[7] === undefined ? start + 999 : start };
}

function daysIn(year: number, month: number): number {
  return new Date(utc(year, month, 1) - 1).getUTCDate();
}

/** Date.UTC without its mapping of years 0-99 to 1900-1999. */
function utc(year: number, month: number, day: number, hour = 0, minute = 0, second = 0): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  d.setUTCHours(hour, minute, second, 0);
  return d.getTime();
}

function zoneOffsetMinutes(zone: string): number | null {
  if (zone === 'Z') return 0;
  const hours = Number(zone.slice(1, 3));
  const minutes = Number(zone.slice(4, 6));
  if (minutes > 59 || hours * 60 + minutes > 14 * 60) return null;
  return (zone.startsWith('-') ? -1 : 1) * (hours * 60 + minutes);
}
