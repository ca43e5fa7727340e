// Comfort only: every page works without this file. Asks before a form button marked
// data-confirm goes ahead (the server asks again where it matters, e.g. "Clear all").
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) {
    event.preventDefault();
  }
});
