// Loading the partitions of every topic: GET /api/partitions when the server has it (one
// request), else the topic list and then each topic's detail, a few requests at a time.
import { ROUTES, api } from "./core.js";

let hasBulk = null;

export async function loadTopics(internal = true) {
  if (hasBulk !== false) {
    try {
      const data = await api("GET", ROUTES.partitions, undefined, { internal: internal ? 1 : 0 });
      hasBulk = true;
      return data.topics;
    } catch (err) {
      if (err.status !== 404 && err.status !== 405) throw err;
      hasBulk = false;
    }
  }
  const list = await api("GET", ROUTES.topics, undefined, { internal: internal ? 1 : 0 });
  const out = new Array(list.length);
  let next = 0;
  const worker = async () => {
    while (next < list.length) {
      const i = next++;
      try {
        out[i] = await api("GET", ROUTES.topic(list[i].name));
      } catch (err) {
        if (err.status !== 404) throw err; // deleted meanwhile
        out[i] = null;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, list.length) }, worker));
  return out.filter((t) => t);
}
