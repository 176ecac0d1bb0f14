// poll.js: runs a refresh function now and then every interval, one call
// at a time (the next waits for the previous one to finish), until stopped.
// Errors are the refresh function's to handle; any that escape are passed
// to onError so that no promise rejection goes unhandled.

export function poll(refresh, intervalMs, onError = () => {}) {
  let stopped = false;
  let running = false;
  let again = false;
  let timer = 0;
  let inFlight = Promise.resolve();
  const tick = async () => {
    timer = 0;
    running = true;
    const call = (async () => refresh())();
    inFlight = call.catch(() => {});
    try {
      await call;
    } catch (err) {
      if (!stopped) onError(err);
    }
    running = false;
    if (stopped) return;
    if (again) {
      again = false;
      tick();
    } else {
      timer = setTimeout(tick, intervalMs);
    }
  };
  tick();
  return {
    // stop ends the refreshes; its promise settles once the refresh in
    // flight, if any, has finished (so that nothing is asked of a service
    // about to be deleted).
    stop() {
      stopped = true;
      clearTimeout(timer);
      return inFlight;
    },
    // now refreshes at once, or right after the refresh in flight.
    now() {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      clearTimeout(timer);
      tick();
    },
  };
}
