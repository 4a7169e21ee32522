"""Look-alike user names cannot be two users (issue 26): one per ``lower(normalize(username, NFKC))``."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("common", "0004_outbox_recipient"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS auth_user_username_canonical_uniq "
            "ON auth_user (lower(normalize(username, NFKC)))",
            "DROP INDEX IF EXISTS auth_user_username_canonical_uniq",
        ),
    ]
