/**
 * HTTP-date (RFC 9110 5.6.7): the IMF-fixdate every sender uses (`Sun, 06 Nov 1994 08:49:37 GMT`) and
 * the two obsolete forms a recipient must still accept, RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
 * asctime (`Sun Nov  6 08:49:37 1994`), all in UTC.
 */

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC_850 = /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/**
 * The time (epoch ms) of an HTTP-date, or null when `value` is not one: another date format (ISO 8601,
 * a bare date), a list, or a day that does not exist. A two-digit RFC 850 year more than 50 years
 * ahead of `now` is the most recent past year with those digits (RFC 9110 5.6.7).
 */
export function parseHttpDate(value: string, now = Date.now()): number | null {
  const text = value.trim();
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(Number(m[3]), m[2]!, Number(m[1]), m[4]!, m[5]!, m[6]!);
  m = RFC_850.exec(text);
  if (m) {
    const thisYear = new Date(now).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    return utc(year, m[2]!, Number(m[1]), m[4]!, m[5]!, m[6]!);
  }
  m = ASCTIME.exec(text);
  if (m) return utc(Number(m[6]), m[1]!, Number(m[2]!.trim()), m[3]!, m[4]!, m[5]!);
  return null;
}

function utc(year: number, monthName: string, day: number, hh: string, mm: string, ss: string): number | null {
  const month = MONTHS.indexOf(monthName);
  const [h, min, s] = [Number(hh), Number(mm), Number(ss)];
  if (month < 0 || h > 23 || min > 59 || s > 60) return null;
  const t = Date.UTC(year, month, day, h, min, Math.min(s, 59));
  // Date.UTC rolls 31 Feb over into March: such a day is not a date.
  return new Date(t).getUTCDate() === day ? t : null;
}
