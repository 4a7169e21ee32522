"""The contact cap's recent sends as common's SQL function ``cw_recent_sends`` (issue 42: another app's statement
calls it by name instead of splicing common's SQL text)."""

from django.db import migrations

from common.queries import RECENT_SENDS_FUNCTION_DROP, recent_sends_function_ddl


class Migration(migrations.Migration):

    dependencies = [("common", "0005_username_canonical_unique")]

    operations = [migrations.RunSQL(recent_sends_function_ddl(), RECENT_SENDS_FUNCTION_DROP)]
