/**
 * Great-circle geometry of `near` searches (src/fhir/near.ts), shared by the SQL both adapters run and
 * the in-memory matcher: distances on a sphere of the Earth's mean radius, by the haversine formula.
 */
import type { NearPoint } from './types.ts';

/** The Earth's mean radius (IUGG), km. */
export const EARTH_RADIUS_KM = 6371.0088;

const RAD = Math.PI / 180;

/**
 * The haversine term of a point at (latitude, longitude) from `p`: sin²(Δφ/2) + cos φ1 cos φ2 sin²(Δλ/2),
 * which is sin² of half the central angle between them.
 */
export function haversineTerm(p: NearPoint, latitude: number, longitude: number): number {
  const dLat = Math.sin(((latitude - p.latitude) * RAD) / 2);
  const dLong = Math.sin(((longitude - p.longitude) * RAD) / 2);
  return dLat * dLat + Math.cos(p.latitude * RAD) * Math.cos(latitude * RAD) * dLong * dLong;
}

/**
 * The largest haversine term within `p.km` (sin² of half its central angle), or undefined when the
 * distance reaches the antipode and every position is within it.
 */
export function nearBound(p: NearPoint): number | undefined {
  const half = p.km / EARTH_RADIUS_KM / 2;
  return half >= Math.PI / 2 ? undefined : Math.sin(half) ** 2;
}

/**
 * A latitude band and longitude ranges that hold every position within `p.km` of `p` (fewer are measured
 * for nothing): the band is the circle's north and south extent; the longitudes span it at the band's
 * widest, two ranges where they cross the antimeridian, none (every longitude) where the band holds a pole.
 */
export function nearBox(p: NearPoint): { latitude: [number, number]; longitudes: [number, number][] | undefined } {
  const angle = p.km / EARTH_RADIUS_KM / RAD;
  const south = p.latitude - angle;
  const north = p.latitude + angle;
  const latitude: [number, number] = [Math.max(-90, south), Math.min(90, north)];
  if (south <= -90 || north >= 90) return { latitude, longitudes: undefined };
  // The widest longitude span of a circle of angular radius r at latitude φ: asin(sin r / cos φ).
  const span = Math.asin(Math.min(1, Math.sin(angle * RAD) / Math.cos(p.latitude * RAD))) / RAD;
  if (span >= 180) return { latitude, longitudes: undefined };
  const west = p.longitude - span;
  const east = p.longitude + span;
  if (west < -180) return { latitude, longitudes: [[west + 360, 180], [-180, east]] };
  if (east > 180) return { latitude, longitudes: [[west, 180], [-180, east - 360]] };
  return { latitude, longitudes: [[west, east]] };
}
