// The dashboard's entry point.
document.getElementById('conn').textContent = 'loaded';
