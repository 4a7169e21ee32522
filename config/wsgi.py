import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from common.fastpath import wsgi_application  # noqa: E402

# Token-authenticated /api/ requests skip the browser-only middleware (common/fastpath/lean_api.py).
application = wsgi_application()
