/**
 * `near` (R4 Location-near, the core's one special parameter): Locations whose `position` lies within
 * a distance of a point, `[latitude]|[longitude]|[distance]|[units]` in WGS84 degrees. R4 leaves the
 * method to the server; Cinder measures the great-circle distance on a sphere of the Earth's mean
 * radius (haversine), within a few tenths of a percent of the ellipsoid's. A Location's position is
 * indexed as one `search_range` row of `near` whose low end is its latitude and high end its longitude:
 * the `(k, low)` index finds the latitude band of a query's circle, and each row is then measured.
 */
import { FhirError } from '../errors.ts';
import { haversineTerm, nearBound } from '../store/geo.ts';
import type { NearPoint } from '../store/types.ts';
import { splitEscaped, unescapeValue } from './search-values.ts';

/** The distance when a query gives none (R4: "the server can use its own discretion"). */
export const NEAR_DEFAULT_KM = 10;

/** Kilometres per unit, by UCUM code (R4: "if the units are omitted, then kms should be assumed"). */
const KM_PER_UNIT: Record<string, number> = { km: 1, m: 0.001, '[mi_i]': 1.609344, '[nmi_i]': 1.852 };

/** How `near` is searched, for the CapabilityStatement. */
export const NEAR_DOC =
  `[latitude]|[longitude]|[distance]|[units] (WGS84): great-circle distance from Location.position; units ${Object.keys(KM_PER_UNIT).join(', ')} ` +
  `(km when omitted); ${NEAR_DEFAULT_KM} km when the distance is omitted.`;

const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

function invalid(param: string, message: string): FhirError {
  return new FhirError('invalid', message, { expression: [param] });
}

function decimal(param: string, raw: string, what: string, min: number, max: number): number {
  const v = unescapeValue(raw).trim();
  const n = DECIMAL.test(v) ? Number(v) : NaN;
  if (!(n >= min && n <= max)) throw invalid(param, `Invalid ${what} '${v}' in '${param}': expected a number from ${min} to ${max}`);
  return n;
}

/** One value of `near` (still escaped): `latitude|longitude[|distance[|units]]`. */
export function parseNear(param: string, raw: string): NearPoint {
  const parts = splitEscaped(raw, '|');
  if (parts.length < 2 || parts.length > 4) {
    throw invalid(param, `Invalid '${param}' value '${raw}': expected [latitude]|[longitude]|[distance]|[units]`);
  }
  const latitude = decimal(param, parts[0]!, 'latitude', -90, 90);
  const longitude = decimal(param, parts[1]!, 'longitude', -180, 180);
  const distance = parts[2] === undefined || parts[2] === '' ? undefined : decimal(param, parts[2], 'distance', 0, Number.MAX_VALUE);
  const unit = parts[3] === undefined || parts[3] === '' ? 'km' : unescapeValue(parts[3]);
  const perUnit = KM_PER_UNIT[unit];
  if (perUnit === undefined) {
    throw invalid(param, `Unknown distance unit '${unit}' in '${param}': use one of ${Object.keys(KM_PER_UNIT).join(', ')} (UCUM codes)`);
  }
  return { latitude, longitude, km: distance === undefined ? NEAR_DEFAULT_KM : distance * perUnit };
}

/** Whether a position is within `p.km` of `p` (the in-memory matcher's test; SQL computes the same). */
export function isNear(p: NearPoint, latitude: number, longitude: number): boolean {
  const bound = nearBound(p);
  return bound === undefined || haversineTerm(p, latitude, longitude) <= bound;
}
