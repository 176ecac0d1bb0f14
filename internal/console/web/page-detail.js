// page-detail.js: one service's page. Header (name, state, message,
// endpoint, token behind a toggle), actions (modify, stop, start, delete,
// the last three confirmed in a dialog), model download progress, metrics
// charts (more for a generative service), the test panel (with a chat for a
// generative service), versions (switch / roll back), instances, events
// (newest first) and the current config. Everything refreshes every 2 s.

import { control, servicePath, regionOf } from './api.js';
import {
  h, setText, stateBadge, formatBytes, formatDuration, formatTime, processorOf,
  prettyJSON, createNotice, tableWrap, replaceKeepingFocus,
} from './dom.js';
import { confirmAction } from './dialog.js';
import { MetricsPanel } from './metrics-panel.js';
import { TestPanel } from './testpanel.js';
import { poll } from './poll.js';
import { go, regions, serviceHash, setFlash, takeFlash } from './state.js';

const REFRESH_MS = 2000;

export function mount(main, { name }) {
  const page = new DetailPage(name);
  main.append(page.element);
  const flash = takeFlash();
  if (flash) page.notice.show(flash.warnings.length ? 'warn' : 'ok', flash.message, flash.warnings);
  page.start();
  return () => page.destroy();
}

class DetailPage {
  constructor(name) {
    this.name = name;
    this.service = null;
    this.signatures = {};
    this.notice = createNotice('detail-notice'); // actions and the flash
    this.loadNotice = createNotice('load-notice'); // refresh failures
    this.metrics = new MetricsPanel(name);
    this.test = new TestPanel(() => this.service || { ServiceName: name, AccessToken: '' });
    this.element = h('div', { class: 'detail' });
    this.buildHead();
    this.buildSections();
  }

  buildHead() {
    this.state = stateBadge('Loading', h('span', { id: 'state', role: 'status' }));
    this.pending = h('span', { id: 'pending', class: 'muted' });
    this.message = h('p', { id: 'service-message', class: 'service-message', hidden: true });
    this.endpoint = h('code', { id: 'endpoint' });
    this.token = h('code', { id: 'token', class: 'token', text: '••••••••' });
    this.tokenShown = false;
    this.tokenToggle = h('button', { type: 'button', id: 'token-toggle', class: 'small', 'aria-controls': 'token', 'aria-label': 'Show the token', text: 'Show', onclick: () => this.toggleToken() });
    this.facts = {
      processor: h('dd', { id: 'processor' }), version: h('dd', { id: 'version' }),
      instances: h('dd', { id: 'instances' }), created: h('dd', { id: 'created' }), updated: h('dd', { id: 'updated' }),
    };
    const button = (id, text, action, cls) => h('button', { type: 'button', id, class: cls, text, onclick: () => this.act(action) });
    this.buttons = {
      modify: h('button', { type: 'button', id: 'btn-modify', text: 'Modify', onclick: () => go(serviceHash(this.name, '/edit')) }),
      stop: button('btn-stop', 'Stop', () => this.stop()),
      start: button('btn-start', 'Start', () => this.startService()),
      delete: button('btn-delete', 'Delete', () => this.remove(), 'danger'),
    };
    this.head = h('section', { class: 'detail-head', 'aria-labelledby': 'service-title' },
      h('div', { class: 'title-row' },
        h('h1', { id: 'service-title', tabindex: '-1', text: this.name }), this.state, this.pending),
      this.message,
      h('dl', { class: 'facts' },
        h('dt', { text: 'Endpoint' }), h('dd', {}, this.endpoint),
        h('dt', { text: 'Token' }), h('dd', { class: 'token-row' }, this.token, this.tokenToggle),
        h('dt', { text: 'Processor' }), this.facts.processor,
        h('dt', { text: 'Version' }), this.facts.version,
        h('dt', { text: 'Instances' }), this.facts.instances,
        h('dt', { text: 'Created' }), this.facts.created,
        h('dt', { text: 'Updated' }), this.facts.updated),
      h('div', { class: 'actions', role: 'group', 'aria-label': 'Service actions' }, Object.values(this.buttons)));
  }

  buildSections() {
    this.progressBar = h('progress', { id: 'progress', max: '1' });
    this.progressText = h('p', { id: 'progress-text' });
    this.progressTitle = h('h2', { id: 'progress-title' });
    this.progress = h('section', { class: 'panel progress-panel', 'aria-labelledby': 'progress-title', hidden: true },
      this.progressTitle, this.progressBar, this.progressText);
    this.versions = h('div', { class: 'versions-body' });
    this.instances = h('div', { class: 'instances-body' });
    this.queues = h('section', { class: 'panel', 'aria-labelledby': 'queues-title', hidden: true },
      h('h2', { id: 'queues-title', text: 'Queues' }), h('div'));
    this.events = h('ol', { id: 'events', class: 'events' });
    this.config = h('pre', { id: 'config', class: 'code', tabindex: '0', 'aria-label': 'Current service.json' });
    const section = (id, title, ...body) => h('section', { class: 'panel', 'aria-labelledby': id }, h('h2', { id, text: title }), ...body);
    this.element.append(
      this.head, this.notice.element, this.loadNotice.element, this.progress,
      this.metrics.element, this.test.element,
      section('versions-title', 'Versions', this.versions),
      section('instances-title', 'Instances', this.instances),
      this.queues,
      section('events-title', 'Events', this.events),
      section('config-title', 'Current config', this.config));
  }

  start() {
    this.loop = poll(() => this.refresh(), REFRESH_MS, (err) => this.loadNotice.show('error', err.message));
  }

  destroy() {
    this.destroyed = true;
    if (this.loop) this.loop.stop();
    this.metrics.destroy();
  }

  // refresh loads the service and its lists; a service that is gone
  // stops the refreshes.
  async refresh() {
    let region;
    try {
      region = await regionOf(this.name);
    } catch (err) {
      if (this.destroyed) return;
      if (err.status === 404) this.gone(err);
      else this.loadNotice.show('error', `Could not load the service: ${err.message}`);
      return;
    }
    const path = (suffix) => servicePath(region, this.name, suffix);
    const [svc, versions, instances, events] = await Promise.allSettled([
      control('GET', path('')), control('GET', path('/versions')),
      control('GET', path('/instances')), control('GET', path('/events')),
      this.metrics.refresh(),
    ]);
    if (this.destroyed) return;
    if (svc.status === 'rejected') {
      if (svc.reason.status === 404) this.gone(svc.reason);
      else this.loadNotice.show('error', `Could not load the service: ${svc.reason.message}`);
      return;
    }
    this.loadNotice.clear();
    this.showService(svc.value);
    if (versions.status === 'fulfilled') this.showVersions(versions.value);
    if (instances.status === 'fulfilled') this.showInstances(instances.value);
    if (events.status === 'fulfilled') this.showEvents(events.value);
  }

  gone(err) {
    if (this.loop) this.loop.stop();
    regions.delete(this.name);
    if (!this.service) {
      // Never loaded: there is no service to lay out, only a way back.
      this.metrics.destroy();
      this.element.replaceChildren(h('section', { id: 'not-found', class: 'panel', 'aria-labelledby': 'service-title' },
        h('h1', { id: 'service-title', tabindex: '-1', text: this.name }),
        h('p', {}, `There is no service named ${this.name} (${err.message}). `,
          h('a', { href: '#/services', text: 'Go to the services' }), '.')));
      return;
    }
    stateBadge('NotFound', this.state);
    this.loadNotice.show('error', `${err.message}. It may have been deleted.`);
    Object.values(this.buttons).forEach((b) => { b.disabled = true; });
  }

  // changed answers whether data differs from what a section last showed,
  // so that unchanged sections are not rebuilt (keeping focus and scroll).
  changed(section, data) {
    const sig = JSON.stringify(data);
    if (this.signatures[section] === sig) return false;
    this.signatures[section] = sig;
    return true;
  }

  showService(s) {
    this.service = s;
    regions.set(s.ServiceName, s.Region);
    document.title = `${s.ServiceName} · eas-server console`;
    stateBadge(s.Status, this.state);
    setText(this.pending, s.PendingVersion ? `loading version ${s.PendingVersion}` : '');
    const msg = [s.Message, s.Reason && s.Status === 'Failed' ? `(${s.Reason})` : ''].filter(Boolean).join(' ');
    setText(this.message, msg);
    this.message.hidden = !msg;
    this.message.classList.toggle('failed', s.Status === 'Failed');
    setText(this.endpoint, s.IntranetEndpoint);
    if (this.tokenShown) setText(this.token, s.AccessToken);
    const processor = processorOf(s.ServiceConfig);
    setText(this.facts.processor, processor);
    this.test.chooseMode(processor);
    this.metrics.setGenerative(/^llm_/.test(processor));
    setText(this.facts.version, s.LatestVersion !== s.CurrentVersion
      ? `${s.CurrentVersion} (latest ${s.LatestVersion})` : String(s.CurrentVersion));
    setText(this.facts.instances, `${s.RunningInstance} running of ${s.TotalInstance}`);
    setText(this.facts.created, formatTime(s.CreateTime));
    setText(this.facts.updated, formatTime(s.UpdateTime));
    this.buttons.stop.disabled = s.Status === 'Stopped';
    this.buttons.start.disabled = s.Status === 'Running' || s.Status === 'Creating' || s.Status === 'Updating';
    this.showProgress(s);
    this.showQueues(s.Queues);
    if (this.changed('config', s.ServiceConfig)) setText(this.config, prettyJSON(s.ServiceConfig));
  }

  // toggleToken shows or hides the service's AccessToken.
  toggleToken() {
    this.tokenShown = !this.tokenShown;
    setText(this.tokenToggle, this.tokenShown ? 'Hide' : 'Show');
    this.tokenToggle.setAttribute('aria-label', this.tokenShown ? 'Hide the token' : 'Show the token');
    setText(this.token, this.tokenShown ? (this.service ? this.service.AccessToken : '') : '••••••••');
  }

  // showProgress shows the download of the version being loaded.
  showProgress(s) {
    const p = s.Progress;
    this.progress.hidden = !p && !s.PendingVersion;
    if (this.progress.hidden) return;
    setText(this.progressTitle, `Loading version ${s.PendingVersion || s.LatestVersion}`);
    if (!p) {
      this.progressBar.removeAttribute('value');
      this.progressBar.setAttribute('aria-label', 'Loading');
      setText(this.progressText, s.Message || 'Loading the model…');
      return;
    }
    if (p.TotalBytes > 0) {
      this.progressBar.max = p.TotalBytes;
      this.progressBar.value = Math.min(p.DoneBytes, p.TotalBytes);
    } else {
      this.progressBar.removeAttribute('value');
    }
    this.progressBar.setAttribute('aria-label', `Download of ${p.Key}`);
    const parts = [
      `${p.Key}: ${formatBytes(p.DoneBytes)} of ${p.TotalBytes >= 0 ? formatBytes(p.TotalBytes) : 'unknown size'}`,
      p.TotalBytes > 0 ? `${Math.floor((100 * p.DoneBytes) / p.TotalBytes)}%` : '',
      p.BytesPerSecond > 0 ? `${formatBytes(p.BytesPerSecond)}/s` : 'rate not measured yet',
      p.ETASeconds >= 0 ? `${formatDuration(p.ETASeconds)} left` : '',
      p.Retry > 0 ? `retry ${p.Retry}/${p.MaxRetries}${p.LastError ? ` after: ${p.LastError}` : ''}` : '',
    ];
    setText(this.progressText, parts.filter(Boolean).join(' · '));
  }

  showQueues(queues) {
    this.queues.hidden = !queues || !queues.length;
    if (this.queues.hidden || !this.changed('queues', queues)) return;
    const rows = queues.map((q) => h('tr', { 'data-queue': q.Queue },
      h('th', { scope: 'row', text: q.Queue }),
      ...[q.Length, q.MaxLength, q.InFlight, q.Consumers, formatDuration(q.OldestAgeSeconds), q.Redeliveries]
        .map((v) => h('td', { class: 'num', text: v }))));
    const table = h('table', { id: 'queues', class: 'data' },
      h('thead', {}, h('tr', {}, ['Queue', 'Length', 'Max', 'In flight', 'Consumers', 'Oldest', 'Redeliveries']
        .map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', {}, rows));
    this.queues.lastChild.replaceChildren(tableWrap(table, 'Queues table'));
  }

  showVersions(list) {
    if (!this.changed('versions', list)) return;
    const current = list.CurrentVersion;
    const versions = [...(list.Versions || [])].sort((a, b) => b.Version - a.Version);
    const rows = versions.map((v) => {
      const isCurrent = v.Version === current;
      const action = isCurrent
        ? h('span', { class: 'badge badge-ok', text: 'current' })
        : h('button', {
          type: 'button', class: 'switch small', 'data-key': `switch-${v.Version}`,
          text: v.Version < current ? 'Roll back' : 'Switch to',
          'aria-label': `${v.Version < current ? 'Roll back' : 'Switch'} to version ${v.Version}`,
          onclick: () => this.act(() => this.switchTo(v.Version)),
        });
      return h('tr', { 'data-version': String(v.Version), class: isCurrent ? 'current' : null },
        h('th', { scope: 'row', text: v.Version }),
        h('td', { text: formatTime(v.CreateTime) }),
        h('td', { text: v.Processor }),
        h('td', {}, h('details', { 'data-key': `config-${v.Version}` }, h('summary', { text: 'service.json' }),
          h('pre', { class: 'code', text: prettyJSON(v.ServiceConfig) }))),
        h('td', {}, action));
    });
    const table = h('table', { id: 'versions', class: 'data' },
      h('thead', {}, h('tr', {}, ['Version', 'Created', 'Processor', 'Config', ''].map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', {}, rows));
    const open = new Set([...this.versions.querySelectorAll('details[open]')].map((d) => d.dataset.key));
    replaceKeepingFocus(this.versions, [tableWrap(table, 'Versions table')]);
    this.versions.querySelectorAll('details').forEach((d) => { d.open = open.has(d.dataset.key); });
  }

  showInstances(list) {
    if (!this.changed('instances', list)) return;
    const items = list.Instances || [];
    const kube = items.some((i) => i.HostIP || i.InstanceIP);
    const cols = ['Instance', 'Status', 'Version', 'Started', 'Queue depth', ...(kube ? ['Host IP', 'Instance IP', 'Restarts'] : [])];
    const rows = items.map((i) => h('tr', { 'data-instance': i.InstanceName },
      h('th', { scope: 'row', text: i.InstanceName }),
      h('td', {}, stateBadge(i.Status)),
      h('td', { text: i.Version }),
      h('td', { text: formatTime(i.StartTime) }),
      h('td', { class: 'num', text: i.QueueDepth }),
      ...(kube ? [h('td', { text: i.HostIP || '' }), h('td', { text: i.InstanceIP || '' }), h('td', { class: 'num', text: i.Restarts || 0 })] : [])));
    if (!rows.length) rows.push(h('tr', {}, h('td', { colspan: String(cols.length), class: 'muted', text: 'No instances.' })));
    const table = h('table', { id: 'instances', class: 'data' },
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', {}, rows));
    this.instances.replaceChildren(tableWrap(table, 'Instances table'));
  }

  showEvents(list) {
    if (!this.changed('events', list)) return;
    const events = [...(list.Events || [])]
      .map((e, i) => ({ ...e, i }))
      .sort((a, b) => (new Date(b.Time) - new Date(a.Time)) || b.i - a.i);
    const items = events.map((e) => h('li', { class: `event event-${(e.Type || '').toLowerCase()}` },
      h('time', { datetime: e.Time, text: formatTime(e.Time) }),
      h('span', { class: `badge ${e.Type === 'Warning' ? 'badge-warn' : 'badge-off'}`, text: e.Type }),
      h('strong', { class: 'reason', text: e.Reason }),
      h('span', { class: 'event-message', text: e.Message })));
    if (!items.length) items.push(h('li', { class: 'muted', text: 'No events.' }));
    this.events.replaceChildren(...items);
  }

  // act runs an action, showing its error and refreshing afterwards.
  async act(action) {
    const buttons = Object.values(this.buttons);
    buttons.forEach((b) => b.setAttribute('aria-busy', 'true'));
    try {
      await action();
    } catch (err) {
      if (!this.destroyed) this.notice.show('error', err.message);
    } finally {
      buttons.forEach((b) => b.removeAttribute('aria-busy'));
      if (!this.destroyed && this.loop) this.loop.now();
    }
  }

  path(suffix = '') {
    return servicePath(this.service ? this.service.Region : regions.get(this.name), this.name, suffix);
  }

  async stop() {
    const ok = await confirmAction({
      title: `Stop ${this.name}?`,
      text: 'The service drains its requests and releases its model; requests then get 503 until it is started again.',
      yes: 'Stop', danger: true,
    });
    if (!ok) return;
    this.notice.show('info', `Stopping ${this.name}…`);
    this.showService(await control('PUT', this.path('/stop')));
    this.notice.show('ok', `${this.name} stopped.`);
  }

  async startService() {
    this.notice.show('info', `Starting ${this.name}…`);
    this.showService(await control('PUT', this.path('/start')));
    this.notice.show('ok', `${this.name} is starting.`);
  }

  async remove() {
    const ok = await confirmAction({
      title: `Delete ${this.name}?`,
      text: 'The service drains its requests and is removed with all its versions. This cannot be undone.',
      yes: 'Delete', danger: true,
    });
    if (!ok) return;
    this.notice.show('info', `Deleting ${this.name}…`);
    // No refresh may ask for the service while, or after, it goes.
    await this.loop.stop();
    let answer;
    try {
      answer = await control('DELETE', this.path());
    } catch (err) {
      this.start();
      throw err;
    }
    regions.delete(this.name);
    setFlash(answer.Message || `Service "${this.name}" deleted.`);
    go('#/services');
  }

  async switchTo(version) {
    const current = this.service ? this.service.CurrentVersion : 0;
    this.notice.show('info', `${version < current ? 'Rolling back' : 'Switching'} to version ${version}…`);
    this.showService(await control('PUT', this.path('/version'), { Version: version }));
    this.notice.show('ok', `Switching to version ${version}: it serves once loaded.`);
  }
}
