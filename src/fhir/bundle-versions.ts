/**
 * Version-specific references to the entries of a transaction (FHIR R4 http 3.1.0.11.2: references to
 * a resource the server gives an id are updated, and "Version-specific references should remain as
 * version-specific references"; bundle.html strips the version before matching a fullUrl).
 */
import type { ResourceWriter } from '../store/types.ts';
import { etag } from './bundle.ts';
import type { Json, Planned } from './bundle-ops.ts';
import { shadowedVersionId, type PutOptions } from './crud.ts';
import { prepareVersion, storesSameMeasured } from './prepared.ts';
import type { Resource } from './resource.ts';

/** A reference `{fullUrl}/_history/{vid}` (or relative `Type/id/_history/{vid}`): what names the entry, and the version. */
const VERSIONED = /^(.+)\/_history\/([A-Za-z0-9\-.]{1,64})$/;

export function splitVersion(reference: string): { url: string; version: string } | undefined {
  const m = VERSIONED.exec(reference);
  return m && !reference.startsWith('urn:') ? { url: m[1]!, version: m[2]! } : undefined;
}

/** A version-specific reference to an entry that updates or patches: its version is known once the entry's target is locked (settleVersions). */
export interface PendingVersion {
  holder: { reference: string };
  /** The entry the reference names (the leader, for an entry that shares another's write). */
  target: Planned;
  /** The entry whose resource holds the reference. */
  in: Planned;
  /** `Type/id` of the target. */
  reference: string;
}

/**
 * The version an entry leaves its resource at, where known before the store transaction: 1 for a
 * create, the found version for a conditional create that found its resource; undefined for an update
 * or a patch, whose version depends on the stored one (settleVersions).
 */
export function versionBeforeWrite(p: Planned): string | undefined {
  if (p.existing) return String(p.existing.versionId);
  return p.entry.method === 'POST' ? '1' : undefined;
}

/**
 * Inside the store transaction, with the targets locked: sets each pending reference to the version its
 * entry leaves, 1 for a create (2 over a core resource: shadowedVersionId), the current one for an update that changes nothing, else the next.
 * An entry whose own resource holds a pending reference is settled after that reference's target; in a
 * cycle (two updates naming each other's version) each changes its content and writes a new version.
 * Returns the versions, which the writes must then produce (requireVersionsWritten).
 */
export async function settleVersions(
  w: ResourceWriter, pending: PendingVersion[], { base, core, activateSubscription }: Pick<PutOptions, 'base' | 'core' | 'activateSubscription'>, written: (p: Planned) => Resource,
): Promise<Map<Planned, number>> {
  const versions = new Map<Planned, number>();
  let left = pending;
  while (left.length > 0) {
    const waiting = new Set(left.map((r) => r.in));
    const targets = [...new Set(left.map((r) => r.target))];
    const ready = targets.filter((t) => !waiting.has(t));
    const cycle = ready.length === 0;
    for (const t of cycle ? targets : ready) {
      const current = await w.measured(t.entry.type, t.id!);
      // A Subscription is stored as activation rewrites it (its status, its error): it is given the next version,
      // which its write then stores whatever activation makes of it (writtenAnew, PutOptions.newVersion).
      const same = !cycle && !writtenAnew(t, activateSubscription !== undefined) && current !== null && (await storesSameMeasured(w, current, prepareVersion(written(t), t.id!, base))) !== undefined;
      versions.set(t, current === null ? (await shadowedVersionId(core, t.entry.type, t.id!)) + 1 : same ? current.versionId : current.versionId + 1);
    }
    left = left.filter((r) => {
      const v = versions.get(r.target);
      if (v !== undefined) r.holder.reference = `${r.reference}/_history/${v}`;
      return v === undefined;
    });
  }
  return versions;
}

/** Whether `p`, an entry other entries refer to by version, stores a new version whatever it holds: a Subscription that activation rewrites. */
export function writtenAnew(p: Planned, activating: boolean): boolean {
  return activating && p.entry.type === 'Subscription';
}

/** After the writes: each entry settleVersions answered for wrote that version (`out`: the response entries by Bundle index). */
export function requireVersionsWritten(versions: Map<Planned, number>, out: Json[]): void {
  for (const [p, v] of versions) {
    const tag = (out[p.entry.index]?.response as Json | undefined)?.etag;
    if (tag !== etag(v)) throw new Error(`Bundle.entry[${p.entry.index}] wrote ${String(tag)}, where references to it were given version ${v}`);
  }
}
