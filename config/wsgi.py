import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from common.apihandler import get_split_wsgi_application  # noqa: E402

# Token-authenticated /api/ requests skip the browser-only middleware (common/apihandler.py).
application = get_split_wsgi_application()
