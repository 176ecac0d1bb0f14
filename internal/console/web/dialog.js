// dialog.js: the confirmation dialog (the <dialog id="confirm-dialog"> of
// index.html), opened with showModal() so it traps the focus, closes on
// Escape, and gives the focus back to the button that opened it.

let pending = null;

function parts() {
  const dialog = document.getElementById('confirm-dialog');
  return {
    dialog,
    title: document.getElementById('confirm-title'),
    text: document.getElementById('confirm-text'),
    yes: document.getElementById('confirm-yes'),
    no: document.getElementById('confirm-no'),
  };
}

// setupDialog wires the dialog's buttons once, at start.
export function setupDialog() {
  const { dialog, yes, no } = parts();
  yes.addEventListener('click', () => dialog.close('yes'));
  no.addEventListener('click', () => dialog.close('no'));
  dialog.addEventListener('close', () => {
    const resolve = pending;
    pending = null;
    if (resolve) resolve(dialog.returnValue === 'yes');
  });
}

// confirmAction asks a yes/no question; it answers true for yes. danger
// styles the yes button as destructive.
export function confirmAction({ title, text, yes = 'Yes', no = 'Cancel', danger = false }) {
  const p = parts();
  if (p.dialog.open) p.dialog.close('no');
  p.title.textContent = title;
  p.text.textContent = text;
  p.yes.textContent = yes;
  p.no.textContent = no;
  p.yes.classList.toggle('danger', danger);
  p.dialog.returnValue = '';
  return new Promise((resolve) => {
    pending = resolve;
    p.dialog.showModal();
    p.no.focus();
  });
}

// closeDialog cancels an open dialog (when the page changes under it).
export function closeDialog() {
  const { dialog } = parts();
  if (dialog.open) dialog.close('no');
}
