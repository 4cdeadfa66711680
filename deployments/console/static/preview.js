// A preview is the answer to a POST (the upload, the mapping step): give the page its own address, so a reload
// asks GET /uploads/<id> (the same preview, checked again) instead of sending the form again.
(function () {
  const here = document.getElementById("preview-address");
  if (here && here.dataset.href && window.location.pathname !== here.dataset.href) {
    window.history.replaceState(null, "", here.dataset.href);
  }
})();
