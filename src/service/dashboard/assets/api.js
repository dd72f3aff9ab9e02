/* global URLSearchParams */
// The read API (docs/service.md, "Read API"): JSON only.

export async function getJson(path) {
  const response = await fetch(path, { headers: { accept: 'application/json' }, cache: 'no-store' });
  if (!response.ok) {
    let message = `${response.status}`;
    try {
      const body = await response.json();
      if (typeof body.error === 'string') message = `${response.status}: ${body.error}`;
    } catch {
      // not JSON: the status says enough
    }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response.json();
}

/** Every change (paged by the API's cursor), optionally of one repository. */
export async function allChanges(repo) {
  const changes = [];
  let cursor = null;
  for (let page = 0; page < 100; page += 1) {
    const query = new URLSearchParams({ limit: '1000' });
    if (repo) query.set('repo', repo);
    if (cursor) query.set('cursor', cursor);
    const body = await getJson(`/api/changes?${query}`);
    changes.push(...body.changes);
    cursor = body.nextCursor;
    if (!cursor) break;
  }
  return changes;
}

export const changeTimeline = (id) => getJson(`/api/changes/${encodeURIComponent(id)}/timeline`);
export const summary = () => getJson('/api/summary');
