import os

from config.settings import default_module

os.environ.setdefault("DJANGO_SETTINGS_MODULE", default_module())

from common.fastpath import wsgi_application  # noqa: E402
from common.middleware import honour_connection_close  # noqa: E402

# Token-authenticated /api/ requests skip the browser-only middleware (common/fastpath/lean_api.py).
application = honour_connection_close(wsgi_application())
