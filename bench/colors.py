"""One colour per database, the same in every chart and in results.html."""
DATABASES = {'tarantool': '#3b75af', 'postgres': '#519e3e', 'redis': '#c53a32',
             'rediscluster': '#ef8636', None: '#8c8c8c'}
